"""Liquid AI LFM2-VL (single-image example)."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "lfm2_vl",
    "image",
    repo_id="LiquidAI/LFM2-VL-450M",
    architecture="Lfm2VlForConditionalGeneration",
    engine_args={"max_model_len": 4096},
    source=SINGLE_IMAGE,
)
def lfm2_vl(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
