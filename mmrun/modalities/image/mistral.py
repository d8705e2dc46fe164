"""Mistral vision models in Hugging Face format: Mistral Small 3.1, Pixtral."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

_ENGINE_ARGS = {"max_model_len": 8192, "max_num_seqs": 2, "tensor_parallel_size": 2}


def _mistral_prompt(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"<s>[INST]{ctx.question}\n{'[IMG]' * ctx.num_items}[/INST]")


@loader(
    "mistral3",
    "image",
    repo_id="mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    architecture="Mistral3ForConditionalGeneration",
    # The repository also holds the weights in Mistral's own format; vLLM loads the
    # Hugging Face ones, so the other copy is not downloaded.
    engine_args={**_ENGINE_ARGS, "ignore_patterns": ["consolidated.safetensors"]},
)
def mistral3(ctx: LoaderContext) -> Prompt:
    return _mistral_prompt(ctx)


@loader(
    "pixtral_hf",
    "image",
    repo_id="mistral-community/pixtral-12b",
    architecture="LlavaForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
)
def pixtral_hf(ctx: LoaderContext) -> Prompt:
    return _mistral_prompt(ctx)
