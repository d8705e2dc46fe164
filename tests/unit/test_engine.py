"""mmrun.engine's process hygiene that needs no engine: where vLLM's socket files go."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmrun import engine


@pytest.fixture
def temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv(engine.RPC_DIR_ENV, raising=False)
    folder = Path(tempfile.mkdtemp(prefix="mm-"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    engine.remove_private_rpc_dirs()
    os.environ.pop(engine.RPC_DIR_ENV, None)
    folder.rmdir()  # fails if anything was left in it


def test_vllm_sockets_go_to_a_folder_that_is_removed(temp: Path) -> None:
    engine._use_private_rpc_dir()
    private = Path(os.environ[engine.RPC_DIR_ENV])
    assert private.parent == temp and private.is_dir()
    engine._use_private_rpc_dir()  # one folder per process
    assert os.environ[engine.RPC_DIR_ENV] == str(private)
    (private / "5036b19a-b8be-4c28-b414-aee29ea15eaf").touch()  # what vLLM leaves
    engine.remove_private_rpc_dirs()
    assert not private.exists()


def test_the_users_folder_is_kept(temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.RPC_DIR_ENV, str(temp))
    engine._use_private_rpc_dir()
    assert os.environ[engine.RPC_DIR_ENV] == str(temp) and list(temp.iterdir()) == []


def test_no_private_folder_where_socket_paths_would_be_too_long(
        temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = temp / ("d" * 50)  # <deep>/<uuid> fits in 107 bytes, <deep>/mmrun-xxxxxxxx/<uuid> does not
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    engine._use_private_rpc_dir()
    assert engine.RPC_DIR_ENV not in os.environ  # vLLM's own default, which fits
    assert list(deep.iterdir()) == []
    deep.rmdir()
