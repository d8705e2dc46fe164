"""Skywork R1V (single-image example)."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# Skywork-R1V's conversation.py ends a turn with either.
SKYWORK_STOP_TOKENS = ("<｜end▁of▁sentence｜>", "<|endoftext|>")  # noqa: RUF001


@loader(
    "skywork_chat",
    "image",
    repo_id="Skywork/Skywork-R1V-38B",
    architecture="SkyworkR1VChatModel",
    engine_args={"max_model_len": 4096},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def skywork_chat(ctx: LoaderContext) -> Prompt:
    messages = text_messages(f"<image>\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in SKYWORK_STOP_TOKENS),
    )
