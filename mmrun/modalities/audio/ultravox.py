"""Ultravox: Fixie's speech adapter on Llama 3.2."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "ultravox",
    "audio",
    repo_id="fixie-ai/ultravox-v0_5-llama-3_2-1b",
    architecture="UltravoxModel",
    engine_args={"max_model_len": 4096, "max_num_seqs": 5},
    trust_remote_code=True,
    methods=("generate",),
)
def ultravox(ctx: LoaderContext) -> Prompt:
    messages = text_messages("<|audio|>\n" * ctx.num_items + ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="tokenizer"))
