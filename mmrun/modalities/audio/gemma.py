"""Gemma 3n: Google's on-device multimodal Gemma, here with audio input."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "gemma3n",
    "audio",
    repo_id="google/gemma-3n-E2B-it",
    architecture="Gemma3nForConditionalGeneration",
    engine_args={
        "max_model_len": 2048,
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 2,
        "enforce_eager": True,
    },
    methods=("generate",),
)
def gemma3n(ctx: LoaderContext) -> Prompt:
    # Deliberate deviation from vLLM's example: its prompt ends after the question, because
    # "<end_of_turn>\n<start_of_turn>model\n" sits on its own line as a discarded string
    # statement, and it always holds exactly one <audio_soft_token> whatever the count.
    # mmrun puts one <audio_soft_token> per clip and closes the turn for the model's reply.
    audio = "<audio_soft_token>" * ctx.num_items
    return Prompt(
        text=f"<start_of_turn>user\n{audio}{ctx.question}<end_of_turn>\n<start_of_turn>model\n"
    )
