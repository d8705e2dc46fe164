"""The audio modality: ``mmrun audio``. Defaults follow vLLM's audio-language example."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

from mmrun.modalities.audio.checks import clip_length_check
from mmrun.modalities.audio.decode import audio_from_object, decode_audio
from mmrun.plugins import Register
from mmrun.registry import Asset, LoaderSpec, Modality, openai_url


def _chat_part(clip: Any, spec: LoaderSpec) -> dict[str, Any]:
    """A decoded clip as an ``input_audio`` part: vLLM's chat API takes audio as encoded bytes."""
    import base64
    import io

    import soundfile

    waveform, sample_rate = clip
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform, sample_rate, format="WAV", subtype="FLOAT")
    data = base64.b64encode(buffer.getvalue()).decode()
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


def _openai_source(part: Mapping[str, Any]) -> str | None:
    """An ``input_audio`` part carries its clip inline (base64 and a format) as a data URI; an
    ``audio_url`` part names its clip."""
    payload = part.get("input_audio")
    if part.get("type") == "input_audio" and isinstance(payload, Mapping):
        data, form = payload.get("data"), payload.get("format") or "wav"
        return f"data:audio/{form};base64,{data}" if isinstance(data, str) and data else None
    return openai_url(part)


def _describe(info: Mapping[str, Any]) -> str:
    return f"{info['duration_s']:.2f}s @ {info['sample_rate']} Hz"


def _write_samples(folder: Path) -> list[str]:
    """A two-second 440 Hz tone at 16 kHz."""
    import numpy as np
    import soundfile

    t = np.linspace(0, 2.0, 32000, dtype=np.float32)
    path = folder / "tone.wav"
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * 440 * t), 16000)
    return [str(path)]


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
    decode=decode_audio,
    from_object=audio_from_object,
    chat_part=_chat_part,
    short_option="-a",
    extensions=(".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff"),
    column_names=("audio", "audios", "speech", "wav", "flac", "mp3"),
    feature_type="Audio",
    openai_parts=("input_audio", "audio_url"),
    openai_source=_openai_source,
    describe=_describe,
    item_check=clip_length_check,
    write_samples=_write_samples,
    summary="Run an audio-language model on audio clips through vLLM.",
    examples=(
        "mmrun audio -m whisper",
        "mmrun audio -m qwen2_audio -a a.wav -a b.wav --json",
        "find calls -name '*.wav' | mmrun audio -m whisper --input - -o transcripts.jsonl",
    ),
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
    "ming",
    "minicpm",
    "phi",
    "qwen",
    "ultravox",
    "voxtral",
    "whisper",
)


def register(register: Register) -> None:
    """The built-in plugin's hook, called as any third-party plugin's is."""
    register.modality(AUDIO)
    for family in FAMILIES:
        register.models(import_module(f"{__name__}.{family}"))
