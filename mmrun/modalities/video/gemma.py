"""Google Gemma 4 on video."""

from __future__ import annotations

from mmrun.modalities.image.gemma import GEMMA4_ENGINE_ARGS, gemma_turn
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "gemma4",
    "video",
    repo_id="google/gemma-4-31B-it",
    architecture="Gemma4ForConditionalGeneration",
    engine_args=GEMMA4_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    source=SINGLE_IMAGE,
)
def gemma4(ctx: LoaderContext) -> Prompt:
    return Prompt(text=gemma_turn(f"<|video|>\n{ctx.question}"))
