"""AIDC Ovis models: Ovis2, Ovis2.5."""

from __future__ import annotations

from mmrun.modalities._shapes import numbered, text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _ovis_request(ctx: LoaderContext) -> ModelRequest:
    placeholders = numbered("Image-{i}: <image>\n", ctx.num_items, "\n")
    messages = text_messages(f"{placeholders}\n{ctx.question}")
    return ModelRequest(
        engine_args={"max_model_len": 8192, "max_num_seqs": 2, "dtype": "half"},
        prompt=ctx.templates.render(messages, source="tokenizer"),
    )


@loader(
    "ovis",
    "image",
    repo_id="AIDC-AI/Ovis2-1B",
    architecture="Ovis",
    trust_remote_code=True,
)
def ovis(ctx: LoaderContext) -> ModelRequest:
    return _ovis_request(ctx)


@loader(
    "ovis2_5",
    "image",
    repo_id="AIDC-AI/Ovis2.5-2B",
    architecture="Ovis2_5",
    trust_remote_code=True,
)
def ovis2_5(ctx: LoaderContext) -> ModelRequest:
    return _ovis_request(ctx)
