"""Zhipu GLM vision models: GLM-4.1V-Thinking, GLM-4.5V and its FP8 checkpoint."""

from __future__ import annotations

from mmrun.prompts import media_first_messages, template_prompt
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {
    "max_model_len": 32768,
    "max_num_seqs": 2,
    "enforce_eager": True,
    "tensor_parallel_size": 4,
}


def _glm4_5v_prompt(ctx: LoaderContext) -> Prompt:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="processor"))


@loader(
    "glm4_5v",
    "image",
    repo_id="zai-org/GLM-4.5V",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
)
def glm4_5v(ctx: LoaderContext) -> Prompt:
    return _glm4_5v_prompt(ctx)


@loader(
    "glm4_5v_fp8",
    "image",
    repo_id="zai-org/GLM-4.5V-FP8",
    architecture="Glm4vMoeForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
)
def glm4_5v_fp8(ctx: LoaderContext) -> Prompt:
    return _glm4_5v_prompt(ctx)


@loader(
    "glm4_1v",
    "image",
    repo_id="zai-org/GLM-4.1V-9B-Thinking",
    architecture="Glm4vForConditionalGeneration",
    engine_args={"max_model_len": 45082, "max_num_seqs": 2, "enforce_eager": True},
)
def glm4_1v(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
