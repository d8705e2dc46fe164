"""Moonshot Kimi-VL, Kimi K2.5."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "kimi_vl",
    "image",
    repo_id="moonshotai/Kimi-VL-A3B-Instruct",
    architecture="KimiVLForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 4},
    trust_remote_code=True,
)
def kimi_vl(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "kimi_k25",
    "image",
    repo_id="moonshotai/Kimi-K2.5",
    architecture="KimiK25ForConditionalGeneration",
    engine_args={"max_model_len": 4096, "tensor_parallel_size": 4},
    trust_remote_code=True,
    max_items=1,
    # vLLM runs Kimi K2.5 on vision chunks (an image, or a run of a video's frames).
    media_key="vision_chunk",
    source=SINGLE_IMAGE,
)
def kimi_k25(ctx: LoaderContext) -> Prompt:
    return Prompt(
        text="<|im_user|>user<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
        f"{ctx.question}<|im_end|><|im_assistant|>assistant<|im_middle|>"
    )
