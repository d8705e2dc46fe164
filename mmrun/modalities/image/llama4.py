"""Meta Llama 4 (Scout)."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "llama4",
    "image",
    repo_id="meta-llama/Llama-4-Scout-17B-16E-Instruct",
    architecture="Llama4ForConditionalGeneration",
    engine_args={"max_model_len": 131072, "tensor_parallel_size": 8},
    note="gated repository; vLLM's example shards it over 8 GPUs",
)
def llama4(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
