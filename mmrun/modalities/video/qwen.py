"""Qwen vision models on video: Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni, Qwen3-VL, Qwen3.5."""

from __future__ import annotations

from mmrun.modalities.audio.qwen import OMNI_SYSTEM
from mmrun.modalities.image.qwen import (
    OMNI_IMAGE,
    OMNI_VIDEO,
    QWEN3_ENGINE_ARGS,
    QWEN_IMAGE,
    QWEN_VIDEO,
    qwen_prompt,
)
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# vLLM's single-image and video example for Qwen2-VL: the pixel bounds of each frame; the
# frame rate stays the processor's own.
_QWEN2_VL_ENGINE_ARGS = {
    "max_model_len": 4096,
    "max_num_seqs": 5,
    "mm_processor_kwargs": {"min_pixels": 28 * 28, "max_pixels": 1280 * 28 * 28},
}


@loader(
    "qwen2_vl",
    "video",
    repo_id="Qwen/Qwen2-VL-7B-Instruct",
    architecture="Qwen2VLForConditionalGeneration",
    engine_args=_QWEN2_VL_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen2_vl(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)


@loader(
    "qwen2_5_vl",
    "video",
    repo_id="Qwen/Qwen2.5-VL-3B-Instruct",
    architecture="Qwen2_5_VLForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen2_5_vl(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)


@loader(
    "qwen2_5_omni",
    "video",
    repo_id="Qwen/Qwen2.5-Omni-7B",
    architecture="Qwen2_5OmniModel",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    methods=("generate",),
    source=SINGLE_IMAGE,
)
def qwen2_5_omni(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, OMNI_IMAGE * ctx.companion("image") + OMNI_VIDEO, system=OMNI_SYSTEM)


@loader(
    "qwen3_vl",
    "video",
    repo_id="Qwen/Qwen3-VL-4B-Instruct",
    architecture="Qwen3VLForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen3_vl(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)


@loader(
    "qwen3_vl_moe",
    "video",
    repo_id="Qwen/Qwen3-VL-30B-A3B-Instruct",
    architecture="Qwen3VLMoeForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen3_vl_moe(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)


@loader(
    "qwen3_5",
    "video",
    repo_id="Qwen/Qwen3.5-4B",
    architecture="Qwen3_5ForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen3_5(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)


@loader(
    "qwen3_5_moe",
    "video",
    repo_id="Qwen/Qwen3.5-35B-A3B",
    architecture="Qwen3_5MoeForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def qwen3_5_moe(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE * ctx.companion("image") + QWEN_VIDEO)
