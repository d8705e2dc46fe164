"""Moonshot Kimi-VL."""

from __future__ import annotations

from mmrun.prompts import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "kimi_vl",
    "image",
    repo_id="moonshotai/Kimi-VL-A3B-Instruct",
    architecture="KimiVLForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 4},
    trust_remote_code=True,
)
def kimi_vl(ctx: LoaderContext) -> Prompt:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="processor"))
