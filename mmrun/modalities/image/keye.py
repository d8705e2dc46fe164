"""Kwai Keye-VL models: Keye-VL Preview, Keye-VL 1.5."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import CHANGED_UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {"max_model_len": 8192, "max_num_seqs": 5}


@loader(
    "keye_vl",
    "image",
    repo_id="Kwai-Keye/Keye-VL-8B-Preview",
    architecture="KeyeForConditionalGeneration",
    until="0.33",
    engine_args=_ENGINE_ARGS,
    trust_remote_code=True,
)
def keye_vl(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "keye_vl1_5",
    "image",
    repo_id="Kwai-Keye/Keye-VL-1_5-8B",
    architecture="KeyeVL1_5ForConditionalGeneration",
    until="0.33",
    # vLLM's current example raised max_model_len from 8192 to 32768, followed as is.
    # It gives no reason; the likely one: a prompt must hold each image's token count, up to
    # the image processor's max_pixels, and several large images overflow 8192 tokens.
    engine_args={**_ENGINE_ARGS, "max_model_len": 32768},
    trust_remote_code=True,
    source=CHANGED_UPSTREAM,
)
def keye_vl1_5(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
