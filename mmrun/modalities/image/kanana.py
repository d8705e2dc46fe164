"""Kakao Kanana-V (single-image example)."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "kanana_v",
    "image",
    repo_id="kakaocorp/kanana-1.5-v-3b-instruct",
    architecture="KananaVForConditionalGeneration",
    engine_args={"max_model_len": 8192},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def kanana_v(ctx: LoaderContext) -> Prompt:
    messages = text_messages(f"<image>\n{ctx.question}")
    return Prompt(text=ctx.templates.render(messages, source="tokenizer"))
