"""LightOn's LightOnOCR (single-image example)."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "lightonocr",
    "image",
    repo_id="lightonai/LightOnOCR-1B",
    architecture="LightOnOCRForConditionalGeneration",
    max_items=1,
    note="an OCR model: it transcribes the page and ignores the question",
    source=SINGLE_IMAGE,
)
def lightonocr(ctx: LoaderContext) -> Prompt:
    # The image alone, after an empty system turn (closed on the same line), as vLLM writes it.
    return Prompt(
        text="<|im_start|>system<|im_end|>\n<|im_start|>user\n<|image_pad|><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
