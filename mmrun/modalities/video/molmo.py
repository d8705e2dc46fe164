"""Ai2's Molmo2 on video."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "molmo2",
    "video",
    repo_id="allenai/Molmo2-8B",
    architecture="Molmo2ForConditionalGeneration",
    engine_args={"dtype": "bfloat16", "max_num_batched_tokens": 36864},
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def molmo2(ctx: LoaderContext) -> Prompt:
    # The media come before the turn, as in vLLM's single-image and video example.
    image = "<|image|>" * ctx.companion("image")
    return Prompt(
        text=f"{image}<|video|><|im_start|>user\n{ctx.question}<|im_end|>\n<|im_start|>assistant\n"
    )
