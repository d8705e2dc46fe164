"""Shared fixtures: an isolated cache, generated media, and a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.http import PNG, QuietHTTPServer, ScriptedServer, reply
from tests.helpers.stand_in import FAKE_VLLM, load_stand_in_vllm

# The fast tests' time limit, a pytest hook: none of them can hold the suite for good.
from tests.helpers.time_limit import pytest_runtest_call  # noqa: F401

OUTSIDE_CI = "outside_ci"
# Set by `make test-outside-ci`: run the tests marked outside_ci too.
OUTSIDE_CI_ENV = "MMRUN_TEST_OUTSIDE_CI"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked outside_ci run only when asked for (`make test-outside-ci` sets
    MMRUN_TEST_OUTSIDE_CI=1): the older-vLLM rows (their environments take GBs and minutes to
    build) and the rows whose engine is too slow for CI's time."""
    if os.environ.get(OUTSIDE_CI_ENV) == "1":
        return
    kept = [item for item in items if item.get_closest_marker(OUTSIDE_CI) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MMRUN_CACHE_DIR", str(cache))
    monkeypatch.delenv("MMRUN_ASSETS_BASE_URL", raising=False)
    monkeypatch.delenv("MMRUN_TRUST_REMOTE_CODE", raising=False)
    monkeypatch.delenv("MMRUN_PLUGINS", raising=False)
    # No machine here reaches the Hub: fail at once instead of retrying until a timeout.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.fixture(autouse=True)
def no_engine_leftovers() -> Iterator[None]:
    """A test that starts an engine in this process (a stand-in one, usually) must not leave
    its socket folder or log file to later tests, nor their variables to the processes
    later tests start."""
    from mmrun import engine
    from mmrun.engine import log_stream

    names = (engine.RPC_DIR_ENV, log_stream.ENV)
    saved = {name: os.environ.pop(name, None) for name in names}
    yield
    engine.remove_temporary_files()
    for name, value in saved.items():
        os.environ.pop(name, None)
        if value is not None:
            os.environ[name] = value


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small real media files: the default assets' names, so a local server can mirror them."""
    import numpy as np
    import soundfile
    from PIL import Image

    from mmrun.modalities.audio import AUDIO
    from mmrun.modalities.image import IMAGE

    folder = tmp_path_factory.mktemp("media")
    for i, asset in enumerate(IMAGE.assets):
        image = Image.new("RGB", (64 + 8 * i, 48), (20 * i, 255 - 20 * i, 128))
        image.save(
            folder / asset.mirror_name,
            format="JPEG" if asset.mirror_name.endswith(("jpg", "jpeg")) else "PNG",
        )
    for i, asset in enumerate(AUDIO.assets):
        t = np.linspace(0, 1.5 + i, int(16000 * (1.5 + i)), dtype=np.float32)
        soundfile.write(
            folder / asset.mirror_name,
            0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t),
            16000,
            format="OGG",
            subtype="VORBIS",
        )
    Image.new("RGB", (40, 30), (0, 0, 255)).save(folder / "blue.png")
    t = np.linspace(0, 1, 16000, dtype=np.float32)
    soundfile.write(folder / "tone.wav", 0.3 * np.sin(2 * np.pi * 440 * t), 16000)
    return folder


@dataclass
class MediaServer:
    url: str
    requests: list[str] = field(default_factory=list)
    latency_s: float = 0.0
    # Cleared: every request waits until it is set again (a test's "answer now").
    hold: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.hold.set()


@pytest.fixture
def media_server(media_dir: Path) -> Iterator[MediaServer]:
    """A real HTTP server on 127.0.0.1 serving media_dir; it records every request path."""
    state = MediaServer(url="")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(media_dir), **kwargs)

        def do_GET(self) -> None:
            state.requests.append(self.path)
            state.hold.wait()
            if state.latency_s:
                time.sleep(state.latency_s)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.hold.set()
        server.shutdown()
        server.server_close()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/requests")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A real HTTP server on 127.0.0.1 whose routes the test scripts (tests/helpers/http.py)."""
    scripted = ScriptedServer()
    scripted.routes["/blue.png"] = lambda h: reply(h, 200, PNG)
    try:
        yield scripted
    finally:
        scripted.close()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmrun.media import download

    monkeypatch.setattr(download, "RETRY_BACKOFF_S", 0.01)


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch, engine_env: None) -> Iterator[Any]:
    """The stand-in vLLM (tests/helpers/fake_vllm) as ``vllm`` in this process; its ``LLM``
    class, whose attributes set its behaviour. Removed after the test."""
    from mmrun.support import vllm_info

    module = load_stand_in_vllm()
    monkeypatch.setitem(sys.modules, "vllm", module)
    llm = module.LLM
    monkeypatch.setattr(llm, "fail_start", None)
    monkeypatch.setattr(llm, "fail_step", None)
    monkeypatch.setattr(llm, "shutdowns", 0)
    monkeypatch.setattr(llm, "steps", 0)
    monkeypatch.setattr(llm, "die_at", set())
    monkeypatch.setattr(llm, "submitted", [])
    monkeypatch.setattr(llm, "sampled", [])
    vllm_info.cache_clear()  # mmrun.support reads the registry of the vLLM importable now
    try:
        yield llm
    finally:
        vllm_info.cache_clear()


@pytest.fixture
def fake_vllm_env() -> dict[str, str]:
    """The environment of a ``python -m mmrun`` subprocess that imports the stand-in vLLM."""
    path = os.pathsep.join(filter(None, [str(FAKE_VLLM), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def engine_env() -> Iterator[None]:
    """A real (not dry) run sets vLLM's logging variables; keep them out of the session."""
    from mmrun import engine

    names = (
        "VLLM_LOGGING_LEVEL",
        "VLLM_LOGGING_STREAM",
        "TOKENIZERS_PARALLELISM",
        "TRANSFORMERS_VERBOSITY",
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_LOGS",
        "PYTHONWARNINGS",
        engine.RPC_DIR_ENV,
        "MMRUN_ENGINE_LOG",
    )
    saved = {name: os.environ.get(name) for name in names}
    yield
    engine.remove_temporary_files()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
