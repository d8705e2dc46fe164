"""The Hugging Face Hub out of reach: one line within seconds, not minutes of retries.

Before mmrun's first request to the Hub in a run (a processor to render the prompt, a LoRA
snapshot, vLLM's start), it asks the Hub's host once. Measured before this check, without a
network: `mmrun image -m qwen2_5_vl -n 4 --dry-run` took 162 s (a name that does not resolve)
and 184 s (a refused connection), with 67 lines of huggingface_hub's retries.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mmrun import hub_access
from mmrun.errors import DownloadError
from mmrun.hub_access import lora_path
from mmrun.request import LoraAdapter
from tests.helpers.cli import in_process
from tests.helpers.http import ScriptedServer


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return port


UNREACHABLE: dict[str, Callable[[], str]] = {
    "refused": lambda: f"http://127.0.0.1:{closed_port()}",
    "unresolvable": lambda: "http://hub.invalid",  # .invalid never resolves (RFC 2606)
}


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As a user without HF_HUB_OFFLINE (the test session sets it), with a fresh probe."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub_access._probe.cache_clear()
    yield
    hub_access._probe.cache_clear()


@pytest.mark.parametrize("how", sorted(UNREACHABLE))
def test_an_unreachable_hub_is_one_line_within_seconds(
    how: str, online: None, media_server: Any, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(
        HF_ENDPOINT=UNREACHABLE[how](),
        HF_HOME=str(tmp_path / "empty-hf-home"),
        MMRUN_ASSETS_BASE_URL=media_server.url,
    )
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", "image", "-m", "qwen2_5_vl", "-n", "4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("mmrun: error: cannot reach the Hugging Face Hub at "), line
    assert "model of Qwen/Qwen2.5-VL-3B-Instruct" in line  # before vLLM starts
    assert "set HF_HUB_OFFLINE=1" in line
    reason = {"refused": "connection refused", "unresolvable": "its name does not resolve"}
    assert reason[how] in line
    assert elapsed < 10, f"{elapsed:.1f} s"


def test_the_engine_is_not_started_against_an_unreachable_hub(
    online: None, monkeypatch: pytest.MonkeyPatch, media_dir: Path
) -> None:
    from mmrun import engine

    def must_not_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("vLLM was started though the Hub cannot be reached")

    monkeypatch.setattr(engine, "start", must_not_start)
    monkeypatch.setattr(engine, "configure_environment", lambda verbose: None)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE["refused"]())
    result = in_process(["image", "-m", "mistral3", "-i", str(media_dir / "blue.png"), "--quiet"])
    assert result.exit_code == 1, result.stderr
    assert result.stderr.startswith("mmrun: error: cannot reach the Hugging Face Hub")
    assert "to fetch the model of mistralai/" in result.stderr


@pytest.mark.parametrize("how", sorted(UNREACHABLE))
def test_a_lora_snapshot_of_an_unreachable_hub_fails_fast(
    how: str, online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE[how]())
    adapter = LoraAdapter("speech", 1, "lora")
    start = time.monotonic()
    with pytest.raises(DownloadError, match="to fetch the LoRA adapter of org/model"):
        lora_path(adapter, "org/model", resolve=True)
    assert time.monotonic() - start < 8


def test_a_lora_snapshot_that_fails_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline and not in the cache: huggingface_hub's error, in mmrun's one line."""
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    adapter = LoraAdapter("speech", 1, "lora")
    with pytest.raises(DownloadError) as info:
        lora_path(adapter, "org/model", resolve=True)
    assert "cannot fetch the snapshot of org/model (for its LoRA adapter)" in str(info.value)
    assert "\n" not in str(info.value)


class _Hub(http.server.BaseHTTPRequestHandler):
    status = 200
    hits: ClassVar[list[str]] = []

    def do_HEAD(self) -> None:
        _Hub.hits.append(self.path)
        self.send_response(_Hub.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("status", [200, 404, 503])
def test_any_answer_counts_and_the_hub_is_asked_once(
    status: int, online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server error is huggingface_hub's to retry; mmrun only asks whether anyone answers."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Hub.status, _Hub.hits = status, []
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        hub_access.check_reachable("org/model", "the processor")
        hub_access.check_reachable("org/other", "the tokenizer")
    finally:
        server.shutdown()
        server.server_close()
    assert _Hub.hits == ["/"]


def test_nothing_is_asked_offline_or_for_a_local_folder(
    online: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE["refused"]())  # asking it would fail
    hub_access.check_reachable(str(tmp_path), "the processor")  # a local model folder
    for value in ("1", "ON", "yes", "TRUE"):
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
        hub_access.check_reachable("org/model", "the processor")


@pytest.mark.parametrize("load", ["processor", "lora snapshot"])
def test_hf_hub_offline_is_read_when_mmrun_loads_not_when_huggingface_hub_was_imported(
    load: str, monkeypatch: pytest.MonkeyPatch, server: ScriptedServer
) -> None:
    """huggingface_hub reads HF_HUB_OFFLINE once, at its first import. A process that imported
    it before the variable was set (as this test session can) asked the Hub anyway: a dry run
    of a llava URL spent 140 s retrying huggingface.co in CI. mmrun asks for local files
    whenever the variable is set at the moment it loads."""
    import huggingface_hub.constants as constants

    from mmrun.errors import MmrunError
    from mmrun.templates import HFTemplateRenderer

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as if imported while unset
    monkeypatch.setattr(constants, "ENDPOINT", server.base)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(MmrunError, match=f"cannot (load|fetch) the {load.split()[-1]}"):
        if load == "processor":
            _ = HFTemplateRenderer("org/not-cached").processor
        else:
            lora_path(LoraAdapter("speech", 1, "lora"), "org/not-cached", resolve=True)
    # (huggingface_hub may fetch its user-agent registry once per process: not the model's)
    assert [hit.path for hit in server.hits if "not-cached" in hit.path] == []
    assert time.monotonic() - start < 10
