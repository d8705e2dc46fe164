"""rednote-hilab's dots.ocr (single-image example)."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "dots_ocr",
    "image",
    repo_id="rednote-hilab/dots.ocr",
    architecture="DotsOCRForCausalLM",
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def dots_ocr(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"<|img|><|imgpad|><|endofimg|>{ctx.question}")
