"""Open-Bee's Bee (a LLaVA-OneVision-style model)."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "bee",
    "image",
    repo_id="Open-Bee/Bee-8B-RL",
    architecture="BeeForConditionalGeneration",
    engine_args={"max_model_len": 16384, "max_num_seqs": 16},
    trust_remote_code=True,
    source=UPSTREAM,
)
def bee(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
