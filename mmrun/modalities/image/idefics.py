"""Idefics-style vision models: Idefics3, SmolVLM2."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {"max_model_len": 8192, "max_num_seqs": 16, "enforce_eager": True}


def _idefics_prompt(ctx: LoaderContext, bos: str) -> Prompt:
    placeholders = numbered("Image-{i}: <image>\n", ctx.num_items, "\n")
    return Prompt(text=f"{bos}User:{placeholders}\n{ctx.question}<end_of_utterance>\nAssistant:")


@loader(
    "idefics3",
    "image",
    repo_id="HuggingFaceM4/Idefics3-8B-Llama3",
    architecture="Idefics3ForConditionalGeneration",
    # A smaller longest edge means fewer image tiles, hence less memory (model card).
    engine_args={**_ENGINE_ARGS, "mm_processor_kwargs": {"size": {"longest_edge": 2 * 364}}},
)
def idefics3(ctx: LoaderContext) -> Prompt:
    return _idefics_prompt(ctx, "<|begin_of_text|>")


@loader(
    "smolvlm",
    "image",
    repo_id="HuggingFaceTB/SmolVLM2-2.2B-Instruct",
    architecture="SmolVLMForConditionalGeneration",
    engine_args={**_ENGINE_ARGS, "mm_processor_kwargs": {"max_image_size": {"longest_edge": 384}}},
    requires=("num2words",),  # transformers' SmolVLM processor refuses to start without it
)
def smolvlm(ctx: LoaderContext) -> Prompt:
    return _idefics_prompt(ctx, "<|im_start|>")
