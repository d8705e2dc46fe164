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
FILES = {
    name: f"# {name}\nprint('example')\n".encode()
    for name in (upstream.IMAGE_FILE, upstream.AUDIO_FILE, upstream.VISION_FILE)
}


def _sdist(commit: str = "abc1234", files: dict[str, bytes] = FILES) -> bytes:
    buffer = io.BytesIO()
    members = {**files, upstream.VERSION_FILE: f"commit_id = 'g{commit}'\n".encode()}
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, body in members.items():
            info = tarfile.TarInfo(f"vllm-{VERSION}/{name}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def _pin(**changes: str) -> upstream.Pin:
    fields = {
        "version": VERSION,
        "commit": "abc1234",
        "date": "2026-01-01",
        "sdist_sha256": hashlib.sha256(_sdist()).hexdigest(),
    } | changes
    files = {name: hashlib.sha256(body).hexdigest() for name, body in FILES.items()}
    return upstream.Pin(files=files, **fields)


@pytest.fixture
def index(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ScriptedServer:
    sdist = _sdist()
    monkeypatch.setattr(upstream, "ROOT", tmp_path)
    monkeypatch.setattr(upstream, "PINS", (_pin(),))
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


def test_fetches_the_three_files_once(index: ScriptedServer) -> None:
    (pin,) = upstream.PINS
    assert not upstream.present(pin)
    assert upstream.main([]) == 0
    for name, body in FILES.items():
        assert (pin.dest / name).read_bytes() == body
    assert upstream.present(pin)
    assert upstream.main([]) == 0
    assert index.count("/files/vllm.tar.gz") == 1


def test_a_changed_file_is_fetched_again(index: ScriptedServer) -> None:
    (pin,) = upstream.PINS
    assert upstream.main([]) == 0
    first = pin.dest / next(iter(FILES))
    first.write_text("edited")
    assert not upstream.present(pin)
    assert upstream.main([]) == 0
    assert first.read_bytes() == FILES[first.relative_to(pin.dest).as_posix()]


def test_each_pinned_version_has_its_own_folder(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A version the index lacks fails in one line; the other versions are still fetched."""
    monkeypatch.setattr(upstream, "PINS", (_pin(version="0.0.0"), _pin()))
    assert upstream.main([]) == 1
    missing, present = upstream.PINS
    assert not missing.dest.exists() and upstream.present(present)
    assert capsys.readouterr().err.count("\n") == 1


def test_an_sdist_with_other_contents_is_refused(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(upstream, "PINS", (_pin(sdist_sha256="0" * 64),))
    assert upstream.main([]) == 1
    assert "pinned" in capsys.readouterr().err
    assert not upstream.PINS[0].dest.exists()


def test_an_example_file_with_other_contents_is_refused(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name = next(iter(FILES))
    monkeypatch.setitem(upstream.PINS[0].files, name, "0" * 64)
    assert upstream.main([]) == 1
    assert name in capsys.readouterr().err
    assert not upstream.present(upstream.PINS[0])


def test_an_index_without_the_version_fails_in_one_line(
    index: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(upstream, "PINS", (_pin(version="0.0.0"),))
    assert upstream.main([]) == 1
    err = capsys.readouterr().err
    assert "lists no vllm-0.0.0.tar.gz" in err and len(err.strip().splitlines()) == 1
