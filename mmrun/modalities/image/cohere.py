"""Cohere vision models: Aya Vision, Command A Vision."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "aya_vision",
    "image",
    repo_id="CohereForAI/aya-vision-8b",
    architecture="AyaVisionForConditionalGeneration",
    engine_args={"max_num_seqs": 2},
    note="supported in vLLM only until v0.24.0; needs an older vLLM",
)
def aya_vision(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


@loader(
    "command_a_vision",
    "image",
    repo_id="CohereLabs/command-a-vision-07-2025",
    architecture="Cohere2VisionForConditionalGeneration",
    engine_args={"max_model_len": 32768, "tensor_parallel_size": 4},
    note="122B parameters; vLLM's example shards it over 4 GPUs",
)
def command_a_vision(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
