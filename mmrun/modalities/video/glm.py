"""Zhipu GLM vision models on video: GLM-4.1V-Thinking, GLM-4.5V (and FP8), GLM-OCR."""

from __future__ import annotations

from mmrun.modalities.image.glm import GLM_IMAGE, GLM_OCR_ENGINE_ARGS, GLM_VIDEO, glm_prompt
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# GLM-4.5V needs four GPUs, in vLLM's example as in mmrun's image row.
_GLM4_5V_ENGINE_ARGS = {**GLM_OCR_ENGINE_ARGS, "tensor_parallel_size": 4}


@loader(
    "glm4_1v",
    "video",
    repo_id="zai-org/GLM-4.1V-9B-Thinking",
    architecture="Glm4vForConditionalGeneration",
    engine_args=GLM_OCR_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def glm4_1v(ctx: LoaderContext) -> Prompt:
    return glm_prompt(ctx, GLM_IMAGE * ctx.companion("image") + GLM_VIDEO)


@loader(
    "glm4_5v",
    "video",
    repo_id="zai-org/GLM-4.5V",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_GLM4_5V_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def glm4_5v(ctx: LoaderContext) -> Prompt:
    return glm_prompt(ctx, GLM_IMAGE * ctx.companion("image") + GLM_VIDEO)


@loader(
    "glm4_5v_fp8",
    "video",
    repo_id="zai-org/GLM-4.5V-FP8",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_GLM4_5V_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def glm4_5v_fp8(ctx: LoaderContext) -> Prompt:
    return glm_prompt(ctx, GLM_IMAGE * ctx.companion("image") + GLM_VIDEO)


@loader(
    "glm_ocr",
    "video",
    repo_id="zai-org/GLM-OCR",
    architecture="GlmOcrForConditionalGeneration",
    engine_args=GLM_OCR_ENGINE_ARGS,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def glm_ocr(ctx: LoaderContext) -> Prompt:
    return glm_prompt(ctx, GLM_IMAGE * ctx.companion("image") + GLM_VIDEO)
