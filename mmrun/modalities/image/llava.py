"""LLaVA models in Hugging Face format: LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "llava",
    "image",
    repo_id="llava-hf/llava-1.5-7b-hf",
    architecture="LlavaForConditionalGeneration",
    engine_args={"max_num_seqs": 16},
    note="not trained on several images; answers about more than one are poor",
)
def llava(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "llava-next",
    "image",
    repo_id="llava-hf/llava-v1.6-mistral-7b-hf",
    architecture="LlavaNextForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 16},
)
def llava_next(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "llava-onevision",
    "image",
    repo_id="llava-hf/llava-onevision-qwen2-7b-ov-hf",
    architecture="LlavaOnevisionForConditionalGeneration",
    engine_args={"max_model_len": 16384, "max_num_seqs": 16},
)
def llava_onevision(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
