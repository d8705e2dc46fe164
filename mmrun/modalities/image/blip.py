"""Salesforce BLIP-2 (single-image example)."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "blip-2",
    "image",
    repo_id="Salesforce/blip2-opt-2.7b",
    architecture="Blip2ForConditionalGeneration",
    max_items=1,
    # OPT ships no chat template.
    methods=("generate",),
    source=SINGLE_IMAGE,
)
def blip2(ctx: LoaderContext) -> Prompt:
    # vLLM's example notes that the model card's prompt format is inaccurate; this is its own.
    return Prompt(text=f"Question: {ctx.question} Answer:")
