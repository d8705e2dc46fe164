"""Zhipu GLM vision models: GLM-4V, GLM-4.1V-Thinking, GLM-4.5V and its FP8 checkpoint,
GLM-OCR."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import SINGLE_IMAGE, UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {
    "max_model_len": 32768,
    "max_num_seqs": 2,
    "enforce_eager": True,
    "tensor_parallel_size": 4,
}


@loader(
    "glm4_5v",
    "image",
    repo_id="zai-org/GLM-4.5V",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
)
def glm4_5v(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "glm4_5v_fp8",
    "image",
    repo_id="zai-org/GLM-4.5V-FP8",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
)
def glm4_5v_fp8(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "glm4_1v",
    "image",
    repo_id="zai-org/GLM-4.1V-9B-Thinking",
    architecture="Glm4vForConditionalGeneration",
    engine_args={"max_model_len": 45082, "max_num_seqs": 2, "enforce_eager": True},
    source=UPSTREAM,
)
def glm4_1v(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "glm4v",
    "image",
    repo_id="zai-org/glm-4v-9b",
    architecture="GLM4VForCausalLM",
    engine_args={
        "max_model_len": 2048,
        "max_num_seqs": 2,
        "enforce_eager": True,
        "hf_overrides": {"architectures": ["GLM4VForCausalLM"]},
    },
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def glm4v(ctx: LoaderContext) -> Prompt:
    return Prompt(
        text=f"<|user|>\n<|begin_of_image|><|endoftext|><|end_of_image|>{ctx.question}<|assistant|>",
        # GLM-4's <|endoftext|>, <|user|> and <|observation|>.
        stop_token_ids=(151329, 151336, 151338),
    )


# vLLM's single-image and video example for GLM-4.1V, GLM-4.5V and GLM-OCR: a pixel budget per
# image and one frame per second of video.
GLM_MM_PROCESSOR_KWARGS = {
    "size": {"shortest_edge": 12544, "longest_edge": 47040000},
    "fps": 1,
}
GLM_IMAGE = "<|begin_of_image|><|image|><|end_of_image|>"
GLM_VIDEO = "<|begin_of_video|><|video|><|end_of_video|>"
GLM_OCR_ENGINE_ARGS = {
    "max_model_len": 4096,
    "max_num_seqs": 2,
    "mm_processor_kwargs": GLM_MM_PROCESSOR_KWARGS,
    "enforce_eager": True,
}


def glm_prompt(ctx: LoaderContext, placeholder: str) -> Prompt:
    """GLM-4.1V's turn, written by hand as vLLM's single-image and video example does."""
    media = placeholder * ctx.num_items
    return Prompt(
        text="[gMASK]<sop><|system|>\nYou are a helpful assistant.<|user|>\n"
        f"{media}{ctx.question}<|assistant|>assistant\n"
    )


@loader(
    "glm_ocr",
    "image",
    repo_id="zai-org/GLM-OCR",
    architecture="GlmOcrForConditionalGeneration",
    engine_args=GLM_OCR_ENGINE_ARGS,
    max_items=1,
    source=SINGLE_IMAGE,
)
def glm_ocr(ctx: LoaderContext) -> Prompt:
    return glm_prompt(ctx, GLM_IMAGE)
