"""NVIDIA's Flamingo audio models: Audio Flamingo 3, Music Flamingo."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

# Music Flamingo's own system prompt, spelling included.
MUSIC_FLAMINGO_SYSTEM = (
    "You are Music Flamingo, a multimodal assistant for language and music. "
    "On each turn you receive an audio clip which contains music and optional "
    "text, you will receive at least one or both; use your world knowledge and "
    "reasoning to help the user with any task. Interpret the entirety of the "
    "content any input music--regardlenss of whether the user calls it audio, "
    "music, or sound."
)

_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 2, "enforce_eager": True}


def _flamingo_prompt(ctx: LoaderContext, system: str) -> Prompt:
    # vLLM expands each <sound> into the clip's <|sound_bos|> ... <|sound_eos|> tokens.
    return Prompt(text=chatml("<sound>" * ctx.num_items + ctx.question, system=system))


@loader(
    "audioflamingo3",
    "audio",
    repo_id="nvidia/audio-flamingo-3-hf",
    architecture="AudioFlamingo3ForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    methods=("generate",),
    max_items=1,
    note="vLLM 0.32's processor takes one audio per prompt",
)
def audioflamingo3(ctx: LoaderContext) -> Prompt:
    return _flamingo_prompt(ctx, "You are a helpful assistant.")


@loader(
    "musicflamingo",
    "audio",
    repo_id="nvidia/music-flamingo-2601-hf",
    architecture="MusicFlamingoForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    methods=("generate",),
    # vLLM 0.24 takes one audio per Music Flamingo prompt ("At most 1 audio(s) may be
    # provided in one prompt").
    max_items=1,
    note="removed from vLLM in 2026 (0.24.0); needs an older vLLM",
)
def musicflamingo(ctx: LoaderContext) -> Prompt:
    return _flamingo_prompt(ctx, MUSIC_FLAMINGO_SYSTEM)
