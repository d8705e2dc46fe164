"""Structured outputs and per-line settings on the real vLLM CPU engine (guidance for the runs
that ask for JSON, vLLM's choice for the others), with the tiny random-weight checkpoints:
whatever the weights, constrained decoding keeps each answer inside its constraint, and mmrun
checks what comes back.

Few engine starts: one manifest mixes every kind of constraint and per-line setting; the
chat run after it reuses the engine the CLI worker holds; whisper runs once; ``-dp 2`` once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mmrun.errors import EXIT_OK, EXIT_PARTIAL
from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker

pytestmark = pytest.mark.e2e

Factory = Callable[[str, str], TinyCheckpoint]

# Small schemas whose every value is bounded (enums, booleans, small integers): random
# weights would otherwise fill a free string up to max_tokens.
SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
        "animal": {"type": "boolean"},
    },
    "required": ["color", "count", "animal"],
    "additionalProperties": False,
}
SHAPE = {
    "type": "object",
    "properties": {"shape": {"enum": ["circle", "square"]}, "big": {"type": "boolean"}},
    "required": ["shape", "big"],
    "additionalProperties": False,
}
CHOICES = ["cat", "dog", "bird"]
REGEX = "[A-Z][0-9]{2}"


def engine_flags(checkpoint: TinyCheckpoint, seqs: int = 4) -> list[str]:
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": seqs}
    return [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()] + [
        f"--sampling-arg={k}={json.dumps(v)}" for k, v in checkpoint.sampling_args.items()
    ]


def images(folder: Path, count: int) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"img{i:02d}.png"
        Image.new("RGB", (56, 56), ((53 * i) % 256, (29 * i) % 256, 120)).save(path)
        paths.append(path)
    return paths


def rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def in_worker(worker: CliWorker, args: list[str]) -> Any:
    env = {name: value for name, value in os.environ.items() if name.startswith(("MMRUN_", "HF_"))}
    return worker.run(args, {**env, "HF_HUB_OFFLINE": "1"})


def check_line(row: dict[str, Any]) -> None:
    """A line without an error holds an answer its constraint allows."""
    assert row["error"] is None, row
    kind = row["id"].split("-")[0]
    if kind == "schema":
        jsonschema.validate(row["parsed"], SCHEMA)
        assert json.loads(row["text"]) == row["parsed"]
    elif kind == "shape":
        jsonschema.validate(row["parsed"], SHAPE)
    elif kind == "choice":
        assert row["text"] in CHOICES and row["parsed"] is None
    elif kind == "regex":
        assert re.fullmatch(REGEX, row["text"]), row["text"]


def test_a_manifest_mixing_constraints_then_chat_on_the_same_engine(
    tiny_checkpoint: Factory, cli_worker: CliWorker, tmp_path: Path
) -> None:
    qwen = tiny_checkpoint("image", "qwen2_5_vl")
    photos = images(tmp_path / "photos", 6)
    (tmp_path / "shape.json").write_text(json.dumps(SHAPE))
    lines: list[dict[str, Any]] = []
    for i, photo in enumerate(photos):
        lines.append({"id": f"schema-{i}", "image": str(photo)})  # the command line's schema
        lines.append({"id": f"choice-{i}", "image": str(photo), "choice": CHOICES})
        lines.append({"id": f"regex-{i}", "image": str(photo), "regex": REGEX})
    lines.append({"id": "shape-0", "image": str(photos[0]), "json_schema": "shape.json"})
    lines.append({"id": "shape-1", "image": str(photos[1]), "json_schema": SHAPE})
    for i in range(2):  # too few tokens for the schema: cut short, an output error each
        lines.append({"id": f"short-{i}", "image": str(photos[i]), "sampling": {"max_tokens": 3}})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    base = ["image", "-m", "qwen2_5_vl", "--model", str(qwen.path), "-tp", "1"]
    base += engine_flags(qwen)
    run = in_worker(
        cli_worker,
        [
            *base,
            "--input",
            str(manifest),
            "-o",
            str(out),
            "--max-tokens",
            "40",
            "--json-schema",
            json.dumps(SCHEMA),
        ],
    )
    assert run.returncode == EXIT_PARTIAL, run.stderr[-3000:]
    got = rows(out)
    assert sorted(got) == sorted(line["id"] for line in lines)
    for ident, row in got.items():
        if ident.startswith("short-"):
            assert row["error"]["stage"] == "output", row
            assert "raise --max-tokens" in row["error"]["message"]
            assert row["text"] and row["completion_tokens"] == 3 and row["parsed"] is None
        else:
            check_line(row)
    assert f"{len(lines) - 2} done, 2 failed" in run.stderr

    # --method chat on the engine the worker holds: a named run of two prompts.
    chat = in_worker(
        cli_worker,
        [
            *base,
            "--method",
            "chat",
            "-i",
            str(photos[2]),
            "--num-prompts",
            "2",
            "--json",
            "--max-tokens",
            "40",
            "--json-schema",
            json.dumps(SHAPE),
        ],
    )
    assert chat.returncode == EXIT_OK, chat.stderr[-3000:]
    document = json.loads(chat.stdout)
    request = document["request"]
    assert request["sampling"]["structured_outputs"] == {"json": SHAPE}
    assert request["engine_args"]["structured_outputs_config"] == {
        "backend": "guidance",
        "disable_any_whitespace": True,
    }
    for output in document["outputs"]:
        jsonschema.validate(output["parsed"], SHAPE)
        assert output["error"] is None


def test_whisper_answers_one_of_the_choices(
    tiny_checkpoint: Factory, cli_worker: CliWorker, tmp_path: Path
) -> None:
    import numpy as np
    import soundfile

    whisper = tiny_checkpoint("audio", "whisper")
    clips = []
    for i in range(4):
        path = tmp_path / f"clip{i}.wav"
        t = np.arange(16_000) / 16_000
        soundfile.write(path, 0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t), 16_000)
        clips.append(path)
    lines = [
        {"id": f"regex-{i}", "audio": str(p), "regex": REGEX}
        if i % 2
        else {"id": f"choice-{i}", "audio": str(p)}
        for i, p in enumerate(clips)
    ]
    # vLLM's own field, as --sampling-arg structured_outputs=... gives it: converted too
    own = {"structured_outputs": {"choice": CHOICES[:2]}}
    lines.append({"id": "choice-own", "audio": str(clips[0]), "sampling": own})
    manifest = tmp_path / "calls.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = in_worker(
        cli_worker,
        [
            "audio",
            "-m",
            "whisper",
            "--model",
            str(whisper.path),
            "-tp",
            "1",
            *engine_flags(whisper),
            "--input",
            str(manifest),
            "--json",
            "--max-tokens",
            "12",
            "--choice",
            ",".join(CHOICES),
        ],
    )
    assert run.returncode == EXIT_OK, run.stderr[-3000:]
    got = {r["id"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert sorted(got) == ["choice-0", "choice-2", "choice-own", "regex-1", "regex-3"]
    assert got["choice-own"]["text"] in CHOICES[:2]
    for row in got.values():
        check_line(row)


def test_two_replicas_keep_each_line_s_constraint(tiny_checkpoint: Factory, tmp_path: Path) -> None:
    """-dp 2: the constraints cross to the replica processes with the prompts, and the
    answers' checks come back with the outcomes."""
    qwen = tiny_checkpoint("image", "qwen2_5_vl")
    photos = images(tmp_path / "photos", 4)
    lines = [{"id": f"schema-{i}", "image": str(p)} for i, p in enumerate(photos)]
    lines += [
        {"id": f"choice-{i}", "image": str(p), "choice": CHOICES} for i, p in enumerate(photos)
    ]
    lines.append({"id": "short-0", "image": str(photos[0]), "sampling": {"max_tokens": 2}})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "mmrun", "image", "-m", "qwen2_5_vl", "--model"]
    command += [str(qwen.path), "-tp", "1", *engine_flags(qwen), "-dp", "2", "--max-tokens", "40"]
    command += ["--input", str(manifest), "-o", str(out), "--json-schema", json.dumps(SCHEMA)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == EXIT_PARTIAL, proc.stderr[-3000:]
    got = rows(out)
    assert sorted(got) == sorted(line["id"] for line in lines)
    # Answered in replica processes (the first one ready may take them all).
    assert {row["replica"] for row in got.values()} <= {0, 1}
    assert got["short-0"]["error"]["stage"] == "output"
    for ident, row in got.items():
        if ident != "short-0":
            check_line(row)
