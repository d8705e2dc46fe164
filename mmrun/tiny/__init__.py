"""Tiny random-weight checkpoints, built offline, for proving loaders on the real vLLM engine.

Each builder writes a small checkpoint of a seed model's real architecture into a folder:
the real config class with small sizes, a tokenizer trained locally that carries the model's
real special tokens and chat template, and the real image or audio processor, all saved with
``save_pretrained``. No network, no code from a model repository.

The end-to-end tests, ``mmrun selftest`` and the coverage column of ``docs/models.md`` all
read :data:`BUILDERS`, so what is claimed as proven is what is run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
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

# The modules that hold builders. Each exposes BUILDERS (model key -> Builder) and
# UNPROVEN (model key -> why that seed row has no offline proof, in one phrase).
_MODULES = {"image": "mmrun.tiny.image", "audio": "mmrun.tiny.audio"}


def builders() -> dict[tuple[str, str], Builder]:
    """Every tiny builder, keyed by (modality, model key)."""
    found: dict[tuple[str, str], Builder] = {}
    for modality, module in _MODULES.items():
        for key, builder in import_module(module).BUILDERS.items():
            found[(modality, key)] = builder
    return found


def unproven() -> dict[tuple[str, str], str]:
    """Why each seed row without a builder has no offline proof, keyed by (modality, key)."""
    return {
        (modality, key): reason
        for modality, module in _MODULES.items()
        for key, reason in import_module(module).UNPROVEN.items()
    }
