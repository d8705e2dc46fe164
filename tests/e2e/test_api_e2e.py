"""mmrun as a library on the real vLLM engine and the tiny Qwen2.5-VL: one Model answers three
calls on one engine start, each result equal to the line the command line writes for the same
prompt. Prints the seconds to the first result of each call (the first pays the engine start).

Both sides run with ``max_num_seqs=1``, so that no answer depends on which other prompt
shared its batch (random tiny weights give near-tied logits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmrun.tiny import TinyCheckpoint

pytestmark = pytest.mark.e2e

KEY = "qwen2_5_vl"


def without_time(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "finished_at"}


def test_one_model_answers_three_calls_as_the_command_line_does(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from PIL import Image

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_checkpoint("image", KEY)
    folder = tmp_path / "photos"
    folder.mkdir()
    photos = []
    for i in range(3):
        path = folder / f"img{i}.png"
        Image.new("RGB", (56, 56), ((70 * i) % 256, (40 * i) % 256, 90)).save(path)
        photos.append(str(path))
    engine_args = {**tiny.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    out = tmp_path / "cli.jsonl"
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    command = [sys.executable, "-m", "mmrun", "image", "-m", KEY, "--model", str(tiny.path)]
    cli = subprocess.run(
        [*command, "-tp", "1", "--max-tokens", "6", *flags, "-i", str(folder), "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    assert cli.returncode == 0, cli.stderr
    by_cli = {r["id"]: without_time(r) for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(by_cli) == photos

    done = in_own_process(
        "three_calls", {"model": str(tiny.path), "engine_args": engine_args, "photos": photos}
    )
    first_result = done["first_result"]
    print(
        f"\nseconds to first result: call 1 {first_result[0]:.2f} (engine start "
        f"{done['engine_start']:.2f}), call 2 {first_result[1]:.2f}, call 3 {first_result[2]:.2f}"
    )
    for results in done["calls"]:
        assert sorted(r["id"] for r in results) == photos
        for row in results:
            assert without_time(row) == by_cli[row["id"]]
    assert max(first_result[1:]) < first_result[0] / 5  # no engine start after the first


@pytest.mark.engine_processes
def test_two_models_one_after_the_other_leave_no_engine_behind(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_checkpoint("image", KEY)
    engine_args = {**tiny.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    done = in_own_process("two_models", {"model": str(tiny.path), "engine_args": engine_args})
    figures = done["models"]
    for model in figures:
        assert model["answered"]
        assert model["engines"], "vLLM's engine core runs in a process of its own"
        assert model["left"] == [], f"left running: {model['left']}"
    print(
        "\nRSS while open / of the process after close (MiB), engine processes stopped: "
        + "; ".join(f"{m['held_mib']} / {m['after_mib']}, {m['stopped']}" for m in figures)
    )
    # The second model's close returns what it took: the process does not keep an engine.
    assert figures[1]["after_mib"] < figures[0]["after_mib"] + 300


def in_own_process(call: str, args: dict[str, Any]) -> dict[str, Any]:
    """``tests.e2e.api_calls``'s ``call`` in a fresh process (see its docstring)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.e2e.api_calls", call, json.dumps(args)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures
