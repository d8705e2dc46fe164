"""AIDC Ovis models: Ovis2, Ovis2.5."""

from __future__ import annotations

from mmrun.prompts import chatml, numbered, text_messages
from mmrun.registry import CHANGED_UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {"max_model_len": 8192, "max_num_seqs": 2, "dtype": "half"}


def _ovis_prompt(ctx: LoaderContext) -> Prompt:
    placeholders = numbered("Image-{i}: <image>\n", ctx.num_items, "\n")
    messages = text_messages(f"{placeholders}\n{ctx.question}")
    return Prompt(text=ctx.templates.render(messages, source="tokenizer"))


@loader(
    "ovis",
    "image",
    repo_id="AIDC-AI/Ovis2-1B",
    architecture="Ovis",
    engine_args=_ENGINE_ARGS,
    trust_remote_code=True,
)
def ovis(ctx: LoaderContext) -> Prompt:
    return _ovis_prompt(ctx)


@loader(
    "ovis2_5",
    "image",
    repo_id="AIDC-AI/Ovis2.5-2B",
    architecture="Ovis2_5",
    engine_args=_ENGINE_ARGS,
    trust_remote_code=True,
    source=CHANGED_UPSTREAM,
)
def ovis2_5(ctx: LoaderContext) -> Prompt:
    # Written by hand, as vLLM's current example and its Ovis2.5 test do: Ovis2.5's chat
    # template drops "<image>" from plain-text content, so the rendered prompt would carry no
    # image placeholder and vLLM would refuse it.
    placeholders = numbered("Image-{i}: <image>\n", ctx.num_items, "\n")
    return Prompt(text=chatml(f"\n{placeholders}\n{ctx.question}"))
