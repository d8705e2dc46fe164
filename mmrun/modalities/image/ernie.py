"""Baidu ERNIE 4.5-VL (single-image and video example)."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

ERNIE_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 5}
ERNIE_IMAGE = "Picture {i}:<|IMAGE_START|><|image@placeholder|><|IMAGE_END|>"
ERNIE_VIDEO = "Video {i}:<|VIDEO_START|><|video@placeholder|><|VIDEO_END|>"


def ernie_prompt(ctx: LoaderContext, placeholder: str) -> Prompt:
    """ERNIE's turn: the question first, then the numbered media (an image that comes with a
    clip first), then the empty thought."""
    media = numbered(ERNIE_IMAGE, ctx.companion("image")) + numbered(placeholder, ctx.num_items)
    return Prompt(
        text=f"<|begin_of_sentence|>User: {ctx.question}{media}\nAssistant: <think></think>"
    )


@loader(
    "ernie45_vl",
    "image",
    repo_id="baidu/ERNIE-4.5-VL-28B-A3B-PT",
    architecture="Ernie4_5_VLMoeForConditionalGeneration",
    engine_args=ERNIE_ENGINE_ARGS,
    trust_remote_code=True,
    source=SINGLE_IMAGE,
)
def ernie45_vl(ctx: LoaderContext) -> Prompt:
    return ernie_prompt(ctx, ERNIE_IMAGE)
