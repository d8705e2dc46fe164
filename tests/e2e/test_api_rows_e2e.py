"""The Python API and the command line give equal result lines, row by row, on the real vLLM
engine: the same 20 media files through ``mmrun.Model(...).run(items)`` (in a process of its
own, tests/e2e/api_calls.py) and through ``mmrun <modality> ... -o out.jsonl`` (in the CLI
worker), each line equal field by field but ``finished_at``: the tiny Qwen2.5-VL on images by
generate and by chat and on clips, and the tiny Whisper on audio.

Two of the 20 items of each call are given as the media themselves (a PIL image, an audio
clip's samples and rate, a clip's frames and rate), read from the files the command line
reads: their lines equal the command line's for those files, but for their id (their place)
and their media name (``item N <field>``).

Both sides sample greedily (audio samples at 0.2 by default, each prompt with a seed drawn from
its id, which an object's place replaces) and run with ``max_num_seqs=1`` and
``enforce_eager=True``: random tiny weights give near-tied logits, which another batching could
tip."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
from tests.e2e.test_api_e2e import in_own_process, without_time

pytestmark = pytest.mark.e2e

COUNT = 20
MAX_TOKENS = 6
# The items given as Python objects instead of their files.
OBJECTS = (3, 14)
# The clips' frames sampled per prompt (both sides).
NUM_FRAMES = 4


@pytest.fixture
def worker(cli_worker: CliWorker) -> Iterator[CliWorker]:
    """The session's CLI worker; the engine a test started is stopped after it."""
    yield cli_worker
    cli_worker.release()


def write_images(folder: Path) -> list[str]:
    from PIL import Image

    paths = []
    for i in range(COUNT):
        image = Image.new("RGB", (56, 56), ((37 * i) % 256, (91 * i) % 256, 255 - 11 * i))
        image.paste((255 - 12 * i, 60, 8 * i), (4 + i, 8, 30 + i, 40))  # a block that moves
        path = folder / f"img{i:02d}.png"
        image.save(path)
        paths.append(str(path))
    return paths


def write_tones(folder: Path) -> list[str]:
    import numpy as np
    import soundfile

    t = np.arange(16000) / 16000
    paths = []
    for i in range(COUNT):
        tone = (0.3 * np.sin(2 * math.pi * (220 + 55 * i) * t)).astype(np.float32)
        path = folder / f"tone{i:02d}.wav"
        soundfile.write(path, tone, 16000, subtype="FLOAT")
        paths.append(str(path))
    return paths


def write_clips(folder: Path) -> list[str]:
    import cv2
    import numpy as np

    paths = []
    for i in range(COUNT):
        path = folder / f"clip{i:02d}.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 8, (64, 48))
        for f in range(16):
            frame = np.full((48, 64, 3), ((f * 15 + 29 * i) % 256, 200 - 9 * i, 128), np.uint8)
            frame[10:30, 2 * f : 2 * f + 16] = (255 - 10 * i, 40, 8 * f)  # a moving block
            writer.write(frame)
        writer.release()
        paths.append(str(path))
    return paths


def engine_args(tiny: TinyCheckpoint) -> dict[str, Any]:
    return {**tiny.engine_args, "enforce_eager": True, "max_num_seqs": 1}


def cli_lines(
    worker: CliWorker,
    args: list[str],
    tiny: TinyCheckpoint,
    out: Path,
) -> dict[str, dict[str, Any]]:
    """``mmrun <args> -o out`` in the worker, on the tiny checkpoint: its lines by id."""
    flags = ["--model", str(tiny.path), "-tp", "1", "--max-tokens", str(MAX_TOKENS)]
    flags += ["--temperature", "0"]
    flags += [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args(tiny).items()]
    flags += [f"--sampling-arg={k}={json.dumps(v)}" for k, v in tiny.sampling_args.items()]
    run = worker.run([*args, *flags, "-o", str(out)], {"HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.nan_logits_batches == 0, (run.nan_logits_batches, run.logits_batches)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    print(f"\n{' '.join(args[:3])} {args[-1]}: CLI {run.wall_s:.1f} s (reused {run.reused})")
    return {line["id"]: without_time(line) for line in lines}


def api_lines(
    modality: str,
    key: str,
    tiny: TinyCheckpoint,
    paths: list[str],
    methods: list[str],
    **extra: Any,
) -> dict[str, list[dict[str, Any]]]:
    """Each method's lines of one ``Model.run`` call over ``paths``, those at ``OBJECTS``
    given as objects."""
    args = {
        "key": key,
        "modality": modality,
        "model": str(tiny.path),
        "engine_args": {**engine_args(tiny)},
        "max_tokens": MAX_TOKENS,
        "paths": paths,
        "objects": list(OBJECTS),
        "methods": methods,
        **extra,
    }
    if tiny.sampling_args:
        args["sampling_args"] = dict(tiny.sampling_args)
    done = in_own_process("one_row", args)
    print(f"{modality} {key} API seconds (engine start included): {done['seconds']}")
    lines: dict[str, list[dict[str, Any]]] = done["lines"]
    return lines


def check_equal(
    api: list[dict[str, Any]], cli: dict[str, dict[str, Any]], paths: list[str], field: str
) -> None:
    """Every API line equals the command line's for the same file; an object's, but for its
    id and media name."""
    assert sorted(cli) == paths
    assert len(api) == COUNT
    by_place = {line["index"]: without_time(line) for line in api}
    assert sorted(by_place) == list(range(COUNT))
    differing = []
    for place, path in enumerate(paths):
        expected = dict(cli[path])
        assert expected["error"] is None and expected["completion_tokens"] > 0, expected
        if place in OBJECTS:
            expected |= {"id": str(place), "media": [f"item {place} {field}"]}
        if by_place[place] != expected:
            differing.append((place, by_place[place], expected))
    assert differing == [], f"{len(differing)} of {COUNT} lines differ (API, CLI): {differing}"
    texts = len({line["text"] for line in by_place.values()})
    print(f"{field}: {COUNT} lines equal ({texts} distinct texts)")


def test_image_row_by_generate_and_chat(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    worker: CliWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_checkpoint("image", "qwen2_5_vl")
    folder = tmp_path / "images"
    folder.mkdir()
    paths = write_images(folder)
    cli = {
        method: cli_lines(
            worker,
            ["image", "-m", "qwen2_5_vl", "-i", str(folder), "--method", method],
            tiny,
            tmp_path / f"{method}.jsonl",
        )
        for method in ("generate", "chat")
    }
    worker.release()
    api = api_lines("image", "qwen2_5_vl", tiny, paths, ["generate", "chat"])
    for method in ("generate", "chat"):
        check_equal(api[method], cli[method], paths, "image")


def test_audio_row(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    worker: CliWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_checkpoint("audio", "whisper")
    folder = tmp_path / "tones"
    folder.mkdir()
    paths = write_tones(folder)
    args = ["audio", "-m", "whisper", "-a", str(folder), "--method", "generate"]
    cli = cli_lines(worker, args, tiny, tmp_path / "audio.jsonl")
    worker.release()
    api = api_lines("audio", "whisper", tiny, paths, ["generate"])
    check_equal(api["generate"], cli, paths, "audio")


def test_video_row(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    worker: CliWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = tiny_checkpoint("video", "qwen2_5_vl")
    folder = tmp_path / "clips"
    folder.mkdir()
    paths = write_clips(folder)
    args = ["video", "-m", "qwen2_5_vl", "--video", str(folder), "--num-frames", str(NUM_FRAMES)]
    cli = cli_lines(worker, [*args, "--method", "generate"], tiny, tmp_path / "video.jsonl")
    worker.release()
    api = api_lines(
        "video",
        "qwen2_5_vl",
        tiny,
        paths,
        ["generate"],
        modality_options={"num_frames": NUM_FRAMES},
    )
    check_equal(api["generate"], cli, paths, "video")
