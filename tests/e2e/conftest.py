"""Fixtures for the end-to-end tests: tiny offline checkpoints, built once per test session,
and the CLI worker that runs mmrun's CLI on them without paying vLLM's start-up per run.

The real vLLM engine runs on these machines' CPUs; the two variables below are what its CPU
build needs. They are set before any test imports
vllm, and the engine core (a spawned subprocess) inherits them.

Which to use: a test about what mmrun does with a model (its prompt, the engine's answer, the
JSON document) runs the CLI in ``cli_worker`` (see tests/e2e/cli_worker.py: vLLM imported once,
one engine start for generate and chat); a test about the process itself (exit codes seen by
a shell, Ctrl-C, kills, leftover processes or files, memory of the process) starts
``python -m mmrun``.

The engine core in-process: every e2e test runs with ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the
``python -m mmrun`` processes it starts inherit it), which spares each engine start vLLM's
two spawned processes (engine core, CPU worker), each importing vLLM again: about 27 instead
of 61 CPU-seconds for a tiny Qwen2.5-VL start, measured on a 2-core machine. What runs is
the same engine (the same EngineCore, scheduler, model runner and multimodal processor), called
in-process instead of over ZMQ. A test about vLLM's processes (Ctrl-C, kills, the engine's
log from another process, what is left behind) or that proves the command as users run it
is marked ``engine_processes`` and runs with vLLM's default.
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
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "engine_processes: the test needs vLLM's engine core and worker as processes of their "
        "own (vLLM's default), not in mmrun's process",
    )


@pytest.fixture(autouse=True)
def engine_core_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine core in the process that starts it, unless the test is marked
    ``engine_processes``."""
    if request.node.get_closest_marker("engine_processes") is None:
        monkeypatch.setenv(MULTIPROCESSING_ENV, "0")
    else:
        monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> TinyCheckpointFactory:
    """A factory ``(modality, key) -> TinyCheckpoint`` that builds each checkpoint once per
    session, into the session's temporary folder, with the builders of tests/tiny."""
    registry = builders()
    built: dict[tuple[str, str], TinyCheckpoint] = {}

    def build(modality: str, key: str) -> TinyCheckpoint:
        image = registry.get(("image", key))
        # A video row on the image row's checkpoint builds it once (tests/tiny).
        if (
            modality == "video"
            and image is not None
            and registry.get(("video", key)) in (None, image)
        ):
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
