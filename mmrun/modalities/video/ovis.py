"""AIDC Ovis2.5 on video."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "ovis2_5",
    "video",
    repo_id="AIDC-AI/Ovis2.5-2B",
    architecture="Ovis2_5",
    engine_args={"max_model_len": 4096, "max_num_seqs": 2, "dtype": "half"},
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def ovis2_5(ctx: LoaderContext) -> Prompt:
    # Written by hand, as for images: Ovis2.5's chat template drops placeholders from text.
    image = "<image>\n" * ctx.companion("image")
    return Prompt(text=chatml(f"\n{image}<video>\n{ctx.question}"))
