"""Google Gemma vision models: Gemma 3, Gemma 3n, Gemma 4, PaliGemma, PaliGemma 2."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "gemma3",
    "image",
    repo_id="google/gemma-3-4b-it",
    architecture="Gemma3ForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
)
def gemma3(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")


def gemma_turn(user: str, bos: str = "<bos>") -> str:
    """Gemma's user turn, then the model's turn, opened for the answer."""
    return f"{bos}<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


@loader(
    "gemma3n",
    "image",
    repo_id="google/gemma-3n-E2B-it",
    architecture="Gemma3nForConditionalGeneration",
    engine_args={"max_model_len": 2048, "max_num_seqs": 2, "enforce_eager": True},
    max_items=1,
    source=SINGLE_IMAGE,
)
def gemma3n(ctx: LoaderContext) -> Prompt:
    return Prompt(text=gemma_turn(f"<image_soft_token>{ctx.question}", bos=""))


GEMMA4_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 2}


@loader(
    "gemma4",
    "image",
    repo_id="google/gemma-4-31B-it",
    architecture="Gemma4ForConditionalGeneration",
    engine_args=GEMMA4_ENGINE_ARGS,
    max_items=1,
    source=SINGLE_IMAGE,
)
def gemma4(ctx: LoaderContext) -> Prompt:
    return Prompt(text=gemma_turn(f"<|image|>\n{ctx.question}"))


@loader(
    "paligemma",
    "image",
    repo_id="google/paligemma-3b-mix-224",
    architecture="PaliGemmaForConditionalGeneration",
    max_items=1,
    methods=("generate",),
    note="takes task prefixes, not questions: the prompt is 'caption en'",
    source=SINGLE_IMAGE,
)
def paligemma(ctx: LoaderContext) -> Prompt:
    # PaliGemma is prompted with a task prefix; vLLM's example captions in English.
    return Prompt(text="caption en")


@loader(
    "paligemma2",
    "image",
    repo_id="google/paligemma2-3b-ft-docci-448",
    architecture="PaliGemmaForConditionalGeneration",
    max_items=1,
    methods=("generate",),
    note="takes task prefixes, not questions: the prompt is 'caption en'",
    source=SINGLE_IMAGE,
)
def paligemma2(ctx: LoaderContext) -> Prompt:
    return Prompt(text="caption en")
