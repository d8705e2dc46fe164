"""Google Gemma vision models: Gemma 3."""

from __future__ import annotations

from mmrun.prompts import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "gemma3",
    "image",
    repo_id="google/gemma-3-4b-it",
    architecture="Gemma3ForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
)
def gemma3(ctx: LoaderContext) -> Prompt:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="processor"))
