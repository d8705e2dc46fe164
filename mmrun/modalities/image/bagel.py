"""ByteDance Seed's BAGEL (single-image example)."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "bagel",
    "image",
    repo_id="ByteDance-Seed/BAGEL-7B-MoT",
    architecture="BagelForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def bagel(ctx: LoaderContext) -> Prompt:
    return Prompt(text=chatml(f"<|image_pad|>\n{ctx.question}"))
