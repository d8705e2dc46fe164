"""LG AI Research's EXAONE 4.5 on video."""

from __future__ import annotations

from mmrun.modalities.image.qwen import QWEN3_ENGINE_ARGS
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

_IMAGE = "<vision><|image_pad|></vision>"


@loader(
    "exaone4_5",
    "video",
    repo_id="LGAI-EXAONE/EXAONE-4.5-33B",
    architecture="Exaone4_5_ForConditionalGeneration",
    # Its vision tower is Qwen2.5-VL's: the same pixel bounds and frame rate.
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def exaone4_5(ctx: LoaderContext) -> Prompt:
    image = _IMAGE * ctx.companion("image")
    return Prompt(
        text="<|system|>\nYou are a helpful assistant.<|endofturn|>\n"
        f"<|user|>\n{image}<vision><|video_pad|></vision>{ctx.question}<|endofturn|>\n"
        "<|assistant|>\n"
    )
