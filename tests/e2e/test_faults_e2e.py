"""A batch outlives its engine on the real CPU engine: the engine core process killed three
times in the middle of a batch, a prompt that makes the engine core fail every time it runs,
and --max-restarts 0. (A replica of -dp 2 whose engine core is killed: test_scale_out_e2e.py;
a full disk: tests/unit/test_restarts.py.)

The engine core runs as a process of its own here (``engine_processes``), as users run it:
that process is what dies.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mmrun.errors import EXIT_FAILURE, EXIT_PARTIAL
from mmrun.tiny import TinyCheckpoint
from tests.e2e.test_scale_out_e2e import ENV, IN_PROCESS, command, manifest, rows
from tests.helpers.vllm_plugins import kill_engine_core, with_plugin

pytestmark = [pytest.mark.e2e, pytest.mark.engine_processes]

ARGS = ["--max-tokens", "16", "--sampling-arg", "ignore_eos=true", "--quiet"]


@pytest.fixture(scope="module")
def qwen(tiny_checkpoint: Callable[[str, str], TinyCheckpoint]) -> TinyCheckpoint:
    return tiny_checkpoint("image", "qwen2_5_vl")


def test_an_engine_core_killed_three_times_mid_batch_costs_nothing(
    qwen: TinyCheckpoint, tmp_path: Path
) -> None:
    source = manifest(tmp_path / "data", 64)
    undisturbed = tmp_path / "undisturbed.jsonl"
    base = subprocess.run(
        command(qwen, "--input", str(source), "-o", str(undisturbed), *ARGS, seqs=2),
        env=IN_PROCESS,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert base.returncode == 0, base.stderr[-3000:]
    out = tmp_path / "out.jsonl"
    # Each engine core dies at its 6th encoder call, three times; the fourth one finishes.
    env, record = kill_engine_core(ENV, tmp_path / "plugin", at=6, times=3)
    # Not --quiet: the restarts are announced on stderr.
    args = [a for a in ARGS if a != "--quiet"]
    proc = subprocess.run(
        command(qwen, "--input", str(source), "-o", str(out), *args, seqs=2),
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    stderr = proc.stderr
    assert record.is_file() and len(record.read_text().splitlines()) == 3, stderr[-3000:]
    assert proc.returncode == 0, stderr[-3000:]
    died = [line for line in stderr.splitlines() if line.startswith("mmrun: the engine died")]
    assert len(died) == 3, stderr[-3000:]
    assert all(
        line.startswith(
            "mmrun: the engine died (the engine core process was killed by SIGKILL (signal 9): "
            "the kernel's out-of-memory killer sends it too (see `dmesg`)"
        )
        and "prompt(s) back in the queue; starting it again in" in line
        for line in died
    ), "\n".join(died)
    assert "the engine was started again 3 time(s) after it died" in stderr
    final, expected = rows(out), rows(undisturbed)
    assert len(out.read_text().splitlines()) == 64  # every id exactly once
    assert sorted(final) == sorted(expected)
    assert all(final[i]["error"] is None for i in final)
    # greedy texts as if nothing had happened
    assert {i: r["text"] for i, r in final.items()} == {i: r["text"] for i, r in expected.items()}
    sidecar = json.loads(Path(f"{out}.mmrun.json").read_text())
    assert sidecar["last_run"]["restarts"] == 3


# A vLLM plugin (loaded in every vLLM process, from an entry point of the vllm.general_plugins
# group) that makes Qwen2.5-VL's vision encoder fail, as a CUDA fault would, on an image of
# one grid only: that prompt kills the engine core each time it runs.
POISON_PLUGIN = """
import os

def register():
    grid = os.environ.get("POISON_GRID")
    if not grid:
        return
    wanted = [int(n) for n in grid.split(",")]
    from vllm.model_executor.models import qwen2_5_vl

    model = qwen2_5_vl.Qwen2_5_VLForConditionalGeneration
    original = model._process_image_input

    def process(self, image_input):
        if wanted in image_input["image_grid_thw"].tolist():
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return original(self, image_input)

    model._process_image_input = process
"""


def grid_of(qwen: TinyCheckpoint, image: Path) -> str:
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(qwen.path))
    grid = processor.image_processor(images=[Image.open(image)], return_tensors="np")
    return ",".join(str(int(n)) for n in grid["image_grid_thw"][0])


def test_a_prompt_that_kills_the_engine_every_time_becomes_an_error_line(
    qwen: TinyCheckpoint, tmp_path: Path
) -> None:
    from PIL import Image

    source = manifest(tmp_path / "data", 19)
    poison = tmp_path / "data" / "poison.png"
    Image.new("RGB", (112, 56), (200, 10, 10)).save(poison)
    lines = source.read_text().splitlines()
    lines.insert(3, json.dumps({"id": "poison", "image": str(poison)}))
    source.write_text("\n".join(lines) + "\n")
    env = with_plugin(
        ENV, tmp_path / "plugin", "poison_plugin", POISON_PLUGIN, POISON_GRID=grid_of(qwen, poison)
    )
    out = tmp_path / "out.jsonl"
    args = [a for a in ARGS if a != "--quiet"]
    proc = subprocess.run(
        command(qwen, "--input", str(source), "-o", str(out), *args, seqs=2),
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == EXIT_PARTIAL, proc.stderr[-3000:]
    final = rows(out)
    assert len(out.read_text().splitlines()) == 20 and len(final) == 20
    failed = {i: r for i, r in final.items() if r["error"] is not None}
    assert list(failed) == ["poison"], proc.stderr[-3000:]
    error = failed["poison"]["error"]
    assert error["stage"] == "engine"
    assert error["message"].startswith("the engine died each time this prompt ran alone (")
    assert (
        "RuntimeError: CUDA error: an illegal memory access was encountered" in (error["message"])
    )
    died = [line for line in proc.stderr.splitlines() if line.startswith("mmrun: the engine died")]
    # With others twice (then it is a suspect), alone twice (then it is the cause).
    assert len(died) == 4, proc.stderr[-3000:]
    assert "1 prompt(s) back in the queue; starting it again" in died[2]
    assert "0 prompt(s) back in the queue, the one that killed it given up" in died[3]
    assert "19 done, 1 failed" in proc.stderr


def test_no_restarts_stops_at_the_first_death_in_one_line_and_the_batch_resumes(
    qwen: TinyCheckpoint, tmp_path: Path
) -> None:
    source = manifest(tmp_path / "data", 24)
    out = tmp_path / "out.jsonl"
    # The engine core dies at its 3rd encoder call.
    env, record = kill_engine_core(ENV, tmp_path / "plugin", at=3, times=1)
    proc = subprocess.run(
        command(qwen, "--input", str(source), "-o", str(out), *ARGS, "--max-restarts", "0"),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    stderr = proc.stderr
    assert record.is_file(), "the run ended before its engine core was killed"
    assert proc.returncode == EXIT_FAILURE, stderr[-3000:]
    assert stderr.count("\n") == 1, stderr  # --quiet: the error line alone
    assert stderr.startswith(
        "mmrun: error: the engine core process was killed by SIGKILL (signal 9)"
    ), stderr
    assert "its log: " in stderr
    log = stderr.rsplit("its log: ", 1)[1].split(")")[0]
    assert Path(log).is_file()  # kept after the run, for the reason it holds
    Path(log).unlink()
    again = subprocess.run(
        command(qwen, "--input", str(source), "-o", str(out), *ARGS),
        env=IN_PROCESS,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(rows(out)) == sorted(f"p{i}" for i in range(24))
    assert len(out.read_text().splitlines()) == 24
