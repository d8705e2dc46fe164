"""Fixtures for the end-to-end tests: tiny offline checkpoints, built once per test session.

The real vLLM engine runs on these machines' CPUs; the two variables below are what its CPU
build needs (see /work/shared/notes/vllm-facts.md). They are set before any test imports
vllm, and the engine core (a spawned subprocess) inherits them.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.tiny import builders

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

TinyCheckpointFactory = Callable[[str, str], TinyCheckpoint]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> TinyCheckpointFactory:
    """A factory ``(modality, key) -> TinyCheckpoint`` that builds each checkpoint once per
    session, into the session's temporary folder, with the builders of tests/tiny."""
    registry = builders()
    built: dict[tuple[str, str], TinyCheckpoint] = {}

    def build(modality: str, key: str) -> TinyCheckpoint:
        if modality == "video":  # the same checkpoint as the image row (see tests/tiny)
            modality = "image"
        if (modality, key) not in built:
            dest = tmp_path_factory.mktemp(f"tiny-{modality}-{key}")
            built[(modality, key)] = registry[(modality, key)](dest)
        return built[(modality, key)]

    return build
