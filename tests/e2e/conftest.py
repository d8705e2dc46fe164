"""Fixtures for the end-to-end tests: tiny offline checkpoints, built once per test session,
and the CLI worker that runs mmrun's CLI on them without paying vLLM's start-up per run.

The real vLLM engine runs on these machines' CPUs; the two variables below are what its CPU
build needs (see /work/shared/notes/vllm-facts.md). They are set before any test imports
vllm, and the engine core (a spawned subprocess) inherits them.

Which to use: a test about what mmrun does with a model (its prompt, the engine's answer, the
JSON document) runs the CLI in ``cli_worker`` (about 5-10 s of engine start per engine on the
2-core CI machine instead of 30-80 s; see tests/e2e/cli_worker.py); a test about the process
itself (exit codes seen by a shell, Ctrl-C, kills, leftover processes or files, memory of the
process) starts ``python -m mmrun``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
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


@pytest.fixture(scope="session")
def cli_worker() -> Iterator[CliWorker]:
    """mmrun's CLI in a worker process of this session (started at its first run): its
    ``run(args, env)`` gives the exit code, stdout and stderr of ``mmrun <args>``. A run whose
    engine arguments equal those of the engine still held reuses it; ``release()`` stops it."""
    worker = CliWorker()
    yield worker
    worker.close()
