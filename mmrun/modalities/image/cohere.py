"""Cohere vision models: Aya Vision, Command A Vision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _cohere_request(ctx: LoaderContext, engine_args: Mapping[str, Any]) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args=engine_args,
        prompt=ctx.templates.render(messages, source="processor"),
    )


@loader(
    "aya_vision",
    "image",
    repo_id="CohereForAI/aya-vision-8b",
    architecture="AyaVisionForConditionalGeneration",
    note="supported in vLLM only until v0.24.0; needs an older vLLM",
)
def aya_vision(ctx: LoaderContext) -> ModelRequest:
    return _cohere_request(ctx, {"max_num_seqs": 2})


@loader(
    "command_a_vision",
    "image",
    repo_id="CohereLabs/command-a-vision-07-2025",
    architecture="Cohere2VisionForConditionalGeneration",
    note="122B parameters; the seed shards it over 4 GPUs",
)
def command_a_vision(ctx: LoaderContext) -> ModelRequest:
    return _cohere_request(ctx, {"max_model_len": 32768, "tensor_parallel_size": 4})
