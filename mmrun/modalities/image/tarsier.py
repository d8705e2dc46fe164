"""Tarsier video-description models: Tarsier, Tarsier2."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "tarsier",
    "image",
    repo_id="omni-research/Tarsier-7b",
    architecture="TarsierForConditionalGeneration",
    engine_args={"max_model_len": 4096},
    trust_remote_code=True,
    note="supported in vLLM only until v0.24.0; needs an older vLLM",
)
def tarsier(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"USER: {'<image>' * ctx.num_items}\n{ctx.question}\n ASSISTANT:")


@loader(
    "tarsier2",
    "image",
    repo_id="omni-research/Tarsier2-Recap-7b",
    architecture="Tarsier2ForConditionalGeneration",
    engine_args={
        "max_model_len": 32768,
        # The checkpoint's config.json names the Qwen2-VL architecture it builds on.
        "hf_overrides": {"architectures": ["Tarsier2ForConditionalGeneration"]},
    },
    trust_remote_code=True,
    note="supported in vLLM only until v0.23.0; needs an older vLLM",
)
def tarsier2(ctx: LoaderContext) -> Prompt:
    images = "<|image_pad|>" * ctx.num_items
    user = f"<|vision_start|>{images}<|vision_end|>{ctx.question}"
    return Prompt(text=chatml(user, system="You are a helpful assistant."))
