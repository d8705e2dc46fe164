"""PaddlePaddle's document models: PaddleOCR-VL."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

_IMAGE = "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"


@loader(
    "paddleocr_vl",
    "image",
    repo_id="PaddlePaddle/PaddleOCR-VL",
    architecture="PaddleOCRVLForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
    trust_remote_code=True,
    source=UPSTREAM,
)
def paddleocr_vl(ctx: LoaderContext) -> Prompt:
    # The images come after the question; the assistant turn ends with a space.
    images = _IMAGE * ctx.num_items
    return Prompt(text=f"<|begin_of_sentence|>User: {ctx.question}{images}\nAssistant: ")
