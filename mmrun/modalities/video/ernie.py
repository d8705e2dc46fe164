"""Baidu ERNIE 4.5-VL on video."""

from __future__ import annotations

from mmrun.modalities.image.ernie import ERNIE_ENGINE_ARGS, ERNIE_VIDEO, ernie_prompt
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "ernie45_vl",
    "video",
    repo_id="baidu/ERNIE-4.5-VL-28B-A3B-PT",
    architecture="Ernie4_5_VLMoeForConditionalGeneration",
    engine_args=ERNIE_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def ernie45_vl(ctx: LoaderContext) -> Prompt:
    return ernie_prompt(ctx, ERNIE_VIDEO)
