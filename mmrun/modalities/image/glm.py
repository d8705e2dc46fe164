"""Zhipu GLM vision models: GLM-4.5V and its FP8 checkpoint."""

from __future__ import annotations

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _glm4_5v_request(ctx: LoaderContext) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args={
            "max_model_len": 32768,
            "max_num_seqs": 2,
            "enforce_eager": True,
            "tensor_parallel_size": 4,
        },
        prompt=ctx.templates.render(messages, source="processor"),
    )


@loader(
    "glm4_5v",
    "image",
    repo_id="zai-org/GLM-4.5V",
    architecture="Glm4vMoeForConditionalGeneration",
)
def glm4_5v(ctx: LoaderContext) -> ModelRequest:
    return _glm4_5v_request(ctx)


@loader(
    "glm4_5v_fp8",
    "image",
    repo_id="zai-org/GLM-4.5V-FP8",
    architecture="Glm4vMoeForConditionalGeneration",
)
def glm4_5v_fp8(ctx: LoaderContext) -> ModelRequest:
    return _glm4_5v_request(ctx)
