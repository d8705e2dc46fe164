"""Tencent Hunyuan vision models: HunyuanOCR (run by vLLM's Transformers backend)."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

# Hunyuan's special tokens, spelt with FULLWIDTH VERTICAL LINE and LOWER ONE EIGHTH BLOCK as in
# its vocabulary (escaped, so that no look-alike character is in the source).
_BOS = "<\uff5chy_begin\u2581of\u2581sentence\uff5c>"
_USER = "<\uff5chy_User\uff5c>"
# Each image: its start, image and end placeholders (numbers 100, 102, 101, in this order).
_IMAGE = "".join(f"<\uff5chy_place\u2581holder\u2581no\u2581{n}\uff5c>" for n in (100, 102, 101))


@loader(
    "hunyuan_vl",
    "image",
    repo_id="tencent/HunyuanOCR",
    architecture="HunYuanVLForConditionalGeneration",
    engine_args={"max_model_len": 8192},
    source=UPSTREAM,
)
def hunyuan_vl(ctx: LoaderContext) -> Prompt:
    # As vLLM's example writes it: the user marker comes after the question.
    return Prompt(text=f"{_BOS}{_IMAGE * ctx.num_items}{ctx.question}{_USER}")
