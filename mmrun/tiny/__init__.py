"""Tiny random-weight checkpoints, built offline, that prove a model's loader on the real vLLM
engine: the real config class with small sizes, a tokenizer trained locally that carries the
model's real special tokens and chat template, and the real processor, all saved with
``save_pretrained``. No network, no code from a model repository.

The package holds what ``mmrun selftest`` runs (a tiny Qwen2.5-VL and a tiny Whisper); the
builders for every other model live with the tests (tests/tiny).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TinyCheckpoint:
    """A built checkpoint and what running it on the CPU engine needs beyond the loader's args.

    path: the folder to pass as ``--model``.
    engine_args: extra engine arguments for the tiny model on a CPU (``--engine-arg``),
        e.g. a smaller ``max_model_len``.
    sampling_args: sampling overrides the tiny model needs (``--sampling-arg``), e.g. aria's
        literal stop token ids, which lie outside a tiny vocabulary.
    """

    path: Path
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    sampling_args: Mapping[str, Any] = field(default_factory=dict)


Builder = Callable[[Path], TinyCheckpoint]


def selftest_builders() -> dict[tuple[str, str], Builder]:
    """The checkpoints ``mmrun selftest`` builds, keyed by (modality, model key)."""
    from mmrun.tiny.qwen_vl import build_qwen2_5_vl
    from mmrun.tiny.whisper import build_whisper

    return {("image", "qwen2_5_vl"): build_qwen2_5_vl, ("audio", "whisper"): build_whisper}
