"""LLaVA models in Hugging Face format: LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _llava_request(ctx: LoaderContext, engine_args: Mapping[str, Any]) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args={**engine_args, "max_num_seqs": 16},
        prompt=ctx.templates.render(messages, source="processor"),
    )


@loader(
    "llava",
    "image",
    repo_id="llava-hf/llava-1.5-7b-hf",
    architecture="LlavaForConditionalGeneration",
    note="not trained on several images; answers about more than one are poor",
)
def llava(ctx: LoaderContext) -> ModelRequest:
    return _llava_request(ctx, {})


@loader(
    "llava-next",
    "image",
    repo_id="llava-hf/llava-v1.6-mistral-7b-hf",
    architecture="LlavaNextForConditionalGeneration",
)
def llava_next(ctx: LoaderContext) -> ModelRequest:
    return _llava_request(ctx, {"max_model_len": 8192})


@loader(
    "llava-onevision",
    "image",
    repo_id="llava-hf/llava-onevision-qwen2-7b-ov-hf",
    architecture="LlavaOnevisionForConditionalGeneration",
)
def llava_onevision(ctx: LoaderContext) -> ModelRequest:
    return _llava_request(ctx, {"max_model_len": 16384})
