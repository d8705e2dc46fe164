"""Qwen vision models on video: Qwen2-VL, Qwen2.5-VL (vLLM's video example)."""

from __future__ import annotations

from mmrun.prompts import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

# vLLM's single-video example for these models: a frame budget that keeps a clip of
# NUM_FRAMES frames within max_model_len, and one frame per second of the model's sampling.
_ENGINE_ARGS = {
    "max_model_len": 4096,
    "max_num_seqs": 5,
    "mm_processor_kwargs": {"min_pixels": 28 * 28, "max_pixels": 1280 * 28 * 28, "fps": 1},
}


def _qwen_video_prompt(ctx: LoaderContext) -> Prompt:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        *media_first_messages("video", ctx.num_items, ctx.question),
    ]
    return Prompt(text=ctx.templates.render(messages, source="processor"))


@loader(
    "qwen2_vl",
    "video",
    repo_id="Qwen/Qwen2-VL-7B-Instruct",
    architecture="Qwen2VLForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    min_items=1,
    max_items=1,
)
def qwen2_vl(ctx: LoaderContext) -> Prompt:
    return _qwen_video_prompt(ctx)


@loader(
    "qwen2_5_vl",
    "video",
    repo_id="Qwen/Qwen2.5-VL-3B-Instruct",
    architecture="Qwen2_5_VLForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    min_items=1,
    max_items=1,
)
def qwen2_5_vl(ctx: LoaderContext) -> Prompt:
    return _qwen_video_prompt(ctx)
