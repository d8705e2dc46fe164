"""The audio modality: ``mmrun audio``. Defaults follow vLLM's audio-language example."""

from __future__ import annotations

from importlib import import_module

from mmrun.registry import Asset, Modality, Registry

_VLLM_ASSETS = "https://vllm-public-assets.s3.us-west-2.amazonaws.com/multimodal_asset"

AUDIO = Modality(
    name="audio",
    assets=(
        Asset("mary_had_lamb", f"{_VLLM_ASSETS}/mary_had_lamb.ogg", "mary_had_lamb.ogg"),
        Asset("winning_call", f"{_VLLM_ASSETS}/winning_call.ogg", "winning_call.ogg"),
    ),
    questions={
        0: "What is 1+1?",
        1: "What is recited in the audio?",
        2: "What sport and what nursery rhyme are referenced?",
    },
    default_count=1,
    min_count=0,
    temperature=0.2,
    max_tokens=64,
    seed=0,
    default_model="ultravox",
)

FAMILIES = (
    "cohere",
    "flamingo",
    "funaudio",
    "gemma",
    "glm",
    "granite",
    "kimi",
    "midasheng",
    "minicpm",
    "phi",
    "qwen",
    "ultravox",
    "voxtral",
    "whisper",
)


def register(registry: Registry) -> None:
    registry.add_modality(AUDIO)
    for family in FAMILIES:
        registry.add_module(import_module(f"{__name__}.{family}"))
