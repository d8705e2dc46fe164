"""LG AI Research's EXAONE vision models: EXAONE 4.5."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "exaone4_5",
    "image",
    repo_id="LGAI-EXAONE/EXAONE-4.5-33B",
    architecture="Exaone4_5_ForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
    source=UPSTREAM,
)
def exaone4_5(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
