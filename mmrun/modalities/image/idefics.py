"""Idefics-style vision models: Idefics3, SmolVLM2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmrun.modalities._shapes import numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _idefics_request(
    ctx: LoaderContext, bos: str, mm_processor_kwargs: Mapping[str, Any]
) -> ModelRequest:
    placeholders = numbered("Image-{i}: <image>\n", ctx.num_items, "\n")
    return ModelRequest(
        engine_args={
            "max_model_len": 8192,
            "max_num_seqs": 16,
            "enforce_eager": True,
            "mm_processor_kwargs": mm_processor_kwargs,
        },
        prompt=f"{bos}User:{placeholders}\n{ctx.question}<end_of_utterance>\nAssistant:",
    )


@loader(
    "idefics3",
    "image",
    repo_id="HuggingFaceM4/Idefics3-8B-Llama3",
    architecture="Idefics3ForConditionalGeneration",
)
def idefics3(ctx: LoaderContext) -> ModelRequest:
    # A smaller longest edge means fewer image tiles, hence less memory (model card).
    return _idefics_request(ctx, "<|begin_of_text|>", {"size": {"longest_edge": 2 * 364}})


@loader(
    "smolvlm",
    "image",
    repo_id="HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    architecture="SmolVLMForConditionalGeneration",
    requires=("num2words",),  # transformers' SmolVLM processor refuses to start without it
)
def smolvlm(ctx: LoaderContext) -> ModelRequest:
    return _idefics_request(ctx, "<|im_start|>", {"max_image_size": {"longest_edge": 384}})
