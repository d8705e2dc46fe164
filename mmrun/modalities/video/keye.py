"""Kwai Keye-VL models on video: Keye-VL Preview, Keye-VL 1.5."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {"max_model_len": 8192}
_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
_VIDEO = "<|vision_start|><|video_pad|><|vision_end|>"


@loader(
    "keye_vl",
    "video",
    repo_id="Kwai-Keye/Keye-VL-8B-Preview",
    architecture="KeyeForConditionalGeneration",
    until="0.33",
    engine_args=_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def keye_vl(ctx: LoaderContext) -> Prompt:
    return Prompt(text=chatml(_IMAGE * ctx.companion("image") + _VIDEO + ctx.question))


@loader(
    "keye_vl1_5",
    "video",
    # The repository as vLLM's single-image and video example names it.
    repo_id="Kwai-Keye/Keye-VL-1.5-8B",
    architecture="KeyeVL1_5ForConditionalGeneration",
    until="0.33",
    engine_args=_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def keye_vl1_5(ctx: LoaderContext) -> Prompt:
    return Prompt(text=chatml(_IMAGE * ctx.companion("image") + _VIDEO + ctx.question))
