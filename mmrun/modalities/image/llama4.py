"""Meta Llama 4 (Scout)."""

from __future__ import annotations

from mmrun.prompts import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "llama4",
    "image",
    repo_id="meta-llama/Llama-4-Scout-17B-16E-Instruct",
    architecture="Llama4ForConditionalGeneration",
    engine_args={"max_model_len": 131072, "tensor_parallel_size": 8},
    note="gated repository; the seed shards it over 8 GPUs",
)
def llama4(ctx: LoaderContext) -> Prompt:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="processor"))
