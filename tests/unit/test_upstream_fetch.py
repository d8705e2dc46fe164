"""tools/upstream.py: vLLM's example files from a source distribution on a package index,
checked against pinned hashes. A local index on 127.0.0.1 (PEP 691 JSON) stands in for PyPI."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.helpers.http import ScriptedServer, reply
from tools import upstream

VERSION = "9.9.9"
FILES = {name: f"# {name}\nprint('example')\n".encode() for name in upstream.FILES}


def _sdist(commit: str = "abc1234", files: dict[str, bytes] = FILES) -> bytes:
    buffer = io.BytesIO()
    members = {**files, upstream.VERSION_FILE: f"commit_id = 'g{commit}'\n".encode()}
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, body in members.items():
            info = tarfile.TarInfo(f"vllm-{VERSION}/{name}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


@pytest.fixture
def index(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ScriptedServer:
    sdist = _sdist()
    pinned = {name: hashlib.sha256(body).hexdigest() for name, body in FILES.items()}
    monkeypatch.setattr(upstream, "VERSION", VERSION)
    monkeypatch.setattr(upstream, "COMMIT", "abc1234")
    monkeypatch.setattr(upstream, "SDIST_SHA256", hashlib.sha256(sdist).hexdigest())
    monkeypatch.setattr(upstream, "FILES", pinned)
    monkeypatch.setattr(upstream, "DEST", tmp_path / "upstream" / VERSION)
    monkeypatch.setenv(upstream.INDEX_ENV, server.url("/simple"))
    listing = {
        "files": [
            {
                "filename": f"vllm-{VERSION}.tar.gz",
                "url": "../../files/vllm.tar.gz",  # relative, as PyPI's mirrors answer
                "hashes": {"sha256": hashlib.sha256(sdist).hexdigest()},
            }
        ]
    }
    server.routes["/simple/vllm/"] = lambda h: reply(h, 200, json.dumps(listing).encode())
    server.routes["/files/vllm.tar.gz"] = lambda h: reply(h, 200, sdist)
    return server


def test_fetches_the_two_files_once(index: ScriptedServer) -> None:
    assert not upstream.present()
    assert upstream.main([]) == 0
    for name, body in FILES.items():
        assert (upstream.DEST / name).read_bytes() == body
    assert upstream.present()
    assert upstream.main([]) == 0
    assert index.count("/files/vllm.tar.gz") == 1


def test_a_changed_file_is_fetched_again(index: ScriptedServer) -> None:
    assert upstream.main([]) == 0
    first = upstream.DEST / next(iter(FILES))
    first.write_text("edited")
    assert not upstream.present()
    assert upstream.main([]) == 0
    assert first.read_bytes() == FILES[first.relative_to(upstream.DEST).as_posix()]


def test_an_sdist_with_other_contents_is_refused(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(upstream, "SDIST_SHA256", "0" * 64)
    assert upstream.main([]) == 1
    assert "pinned" in capsys.readouterr().err
    assert not upstream.DEST.exists()


def test_an_example_file_with_other_contents_is_refused(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = next(iter(FILES))
    monkeypatch.setitem(upstream.FILES, name, "0" * 64)
    assert upstream.main([]) == 1
    assert name in capsys.readouterr().err
    assert not upstream.present()


def test_an_index_without_the_version_fails_in_one_line(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(upstream, "VERSION", "0.0.0")
    assert upstream.main([]) == 1
    err = capsys.readouterr().err
    assert "lists no vllm-0.0.0.tar.gz" in err and len(err.strip().splitlines()) == 1
