"""Result files as mmrun batches write them (``mmrun.batch/2`` lines), generated for the tests
of ``mmrun report``, ``score`` and ``compare``: images, audio clips, failed items, some lines
with ``parsed`` and ``meta`` fields, each with the moment it finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.records import timestamp

WORDS = ("cat", "dog", "bird", "boat", "tree", "house", "car", "lamp", "cup", "kite")
STAGES = ("media", "request", "engine")
STARTED = 1_796_000_000.0  # when the generated runs start (epoch seconds)


def finished(i: int, count: int) -> float:
    """When line ``i`` of ``count`` finished: 10 results per second for the first 100 (the
    engine warming up), then 20, and the last 30% from the run resumed two hours later."""
    seconds = 0.05 * i + 0.05 * min(i, 100) + 0.02 * (i % 7)
    return STARTED + seconds + (7200.0 if i >= count * 0.7 else 0.0)


def media_files(folder: Path, images: int = 6, clips: int = 3) -> tuple[list[Path], list[Path]]:
    """Small PNGs and WAV clips (0.5 s tones) in ``folder``."""
    import numpy as np
    import soundfile
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    pngs, wavs = [], []
    for i in range(images):
        path = folder / f"photo{i}.png"
        Image.new("RGB", (96, 64), ((50 * i) % 256, (90 * i) % 256, 180)).save(path)
        pngs.append(path)
    for i in range(clips):
        path = folder / f"clip{i}.wav"
        t = np.linspace(0, 0.5, 8000, dtype=np.float32)
        soundfile.write(path, 0.3 * np.sin(2 * np.pi * (300 + 100 * i) * t), 16000)
        wavs.append(path)
    return pngs, wavs


def answer(i: int) -> str:
    return f"Answer {i}: a {WORDS[i % len(WORDS)]} next to a {WORDS[(i * 7) % len(WORDS)]}."


def batch_lines(count: int, pngs: list[Path], wavs: list[Path], base: Path) -> list[dict[str, Any]]:
    """``count`` lines: every 7th failed (stage cycling), every 5th with ``parsed``, every
    4th an audio prompt; media paths relative to ``base`` (as a manifest gives them)."""
    rows = []
    for i in range(count):
        audio = i % 4 == 3
        source = wavs[i % len(wavs)] if audio else pngs[i % len(pngs)]
        failed = i % 7 == 6
        row: dict[str, Any] = {
            "id": f"item{i:06d}",
            "index": i,
            "media": [str(source.relative_to(base))],
            "question": "Transcribe the clip." if audio else "What is in the picture?",
            "text": None if failed else answer(i),
            "prompt_tokens": None if failed else 40 + i % 13,
            "completion_tokens": None if failed else 5 + (i * 31) % 60,
            "finish_reason": None if failed else ("stop" if i % 3 else "length"),
            "meta": {"answer": answer(i) if i % 11 else f"something else {i}"},
            "error": {"stage": STAGES[i % 3], "message": f"item {i} could not run"}
            if failed
            else None,
        }
        row["finished_at"] = timestamp(finished(i, count))
        if i % 5 == 0 and not failed:
            row["parsed"] = {"label": WORDS[i % len(WORDS)], "count": i % 4}
        rows.append(row)
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
