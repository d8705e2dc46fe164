"""The Python API on the command line's other backends: ``data_parallel_size`` (replica
processes, scripted here: tests/helpers/replicas.py) and ``server`` (a scripted vLLM server,
as in tests/unit/test_server.py); the same results and results file as in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mmrun
from mmrun.errors import UsageError
from tests.helpers.http import PNG, ScriptedServer
from tests.unit.test_server import chat_bodies, images, qwen, vllm_server  # noqa: F401

KEY = "mistral3"


@pytest.fixture
def photos(tmp_path: Path) -> list[str]:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(8):
        (folder / f"p{i}.png").write_bytes(PNG)
    return sorted(str(p) for p in folder.iterdir())


@pytest.fixture
def scripted_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmrun.backends import replicas as coordinator
    from tests.helpers import replicas

    monkeypatch.setattr(coordinator, "replica_main", replicas.every_one_answers)


def test_data_parallel_runs_each_call_on_replicas(
    fake_vllm: Any, scripted_replicas: None, photos: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "results.jsonl"
    with mmrun.Model(KEY, data_parallel_size=2, max_tokens=5) as model:
        streamed = list(model.run(photos[:4], max_tokens=9))
        written = model.write(photos, out)
        again = model.write(photos, out)
    assert sorted(r.id for r in streamed) == photos[:4]
    assert {r.text.split(", ")[1] for r in streamed if r.text} == {"max 9"}  # the call's own
    assert sorted(r.id for r in written) == photos and again == []
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.to_dict() for r in written] == rows
    assert {row["replica"] for row in rows} == {0, 1}
    assert {row["text"].split(", ")[1] for row in rows} == {"max 5"}
    assert fake_vllm.submitted == []  # no engine in this process


def test_data_parallel_model_refuses_calls_once_closed(
    fake_vllm: Any, scripted_replicas: None, photos: list[str]
) -> None:
    model = mmrun.Model(KEY, data_parallel_size=2)
    with pytest.raises(UsageError, match="not open"):
        list(model.run(photos))
    with model:
        stream = model.run(photos)
        next(stream)
        with pytest.raises(UsageError, match="still being read"):
            list(model.run(photos))
        stream.close()
        assert len(list(model.run(photos[:2]))) == 2
    with pytest.raises(UsageError, match="not open"):
        model.ask("Hi?", photos[0])


def test_an_unknown_backend_is_one_line() -> None:
    with pytest.raises(UsageError) as raised:
        mmrun.Model(KEY, backend="rai")
    assert str(raised.value) == "unknown backend 'rai' (use one of: local, ray)"


def test_server_answers_the_models_calls(
    vllm_server: ScriptedServer,  # noqa: F811
    qwen: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = images(tmp_path / "imgs", (56, 112))
    files = sorted(str(p) for p in folder.iterdir())
    out = tmp_path / "out.jsonl"
    with mmrun.Model("qwen2_5_vl", model=qwen, server=vllm_server.base) as model:
        one = model.ask("What is it?", files[0], max_tokens=7)
        written = model.write(files, out)
    assert one.ok and one.text == "w112" and one.prompt_tokens == 25
    assert sorted(r.text or "" for r in written) == ["w112", "w56"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.to_dict() for r in written] == rows
    bodies = chat_bodies(vllm_server)
    assert len(bodies) == 3 and bodies[0]["model"] == qwen
    assert [b["max_tokens"] for b in bodies] == [7, 256, 256]


def test_server_with_data_parallel_is_one_line() -> None:
    with pytest.raises(UsageError) as raised:
        mmrun.Model(KEY, server="http://127.0.0.1:9", data_parallel_size=2)
    assert str(raised.value).startswith(
        "--server sends the prompts to one vLLM server; -dp and --backend start engines"
    )
