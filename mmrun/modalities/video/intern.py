"""InternVL-style chat models on video: InternVL3, Intern-S1, Intern-S1-Pro."""

from __future__ import annotations

from mmrun.modalities.image.intern import (
    INTERNS1_PRO_ENGINE_ARGS,
    INTERNVL_STOP_TOKENS,
    placeholder_first_prompt,
)
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "interns1",
    "video",
    repo_id="internlm/Intern-S1-mini",
    architecture="InternS1ForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2, "enforce_eager": True},
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def interns1(ctx: LoaderContext) -> Prompt:
    return placeholder_first_prompt(ctx, "<IMG_CONTEXT>\n" * ctx.companion("image") + "<video>")


@loader(
    "interns1_pro",
    "video",
    repo_id="internlm/Intern-S1-Pro",
    architecture="InternS1ProForConditionalGeneration",
    engine_args=INTERNS1_PRO_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def interns1_pro(ctx: LoaderContext) -> Prompt:
    image = "<|vision_start|><|image_pad|><|vision_end|>" * ctx.companion("image")
    return placeholder_first_prompt(ctx, image + "<|vision_start|><|video_pad|><|vision_end|>")


@loader(
    "internvl_chat",
    "video",
    # vLLM's example runs InternVL3 on video (InternVL2, the image row's, predates it).
    repo_id="OpenGVLab/InternVL3-2B",
    architecture="InternVLChatModel",
    engine_args={"max_model_len": 8192},
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def internvl_chat(ctx: LoaderContext) -> Prompt:
    image = "<image>\n" * ctx.companion("image")
    return placeholder_first_prompt(ctx, image + "<video>", INTERNVL_STOP_TOKENS)
