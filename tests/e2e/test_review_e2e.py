"""A real batch, then `mmrun score`, `report` and `compare` on what it wrote: two runs of the
tiny random-weight Qwen2.5-VL over one manifest (6 and 3 new tokens), so the second answers are
the first ones cut short. The runs are mmrun's CLI in the CLI worker (tests/e2e/cli_worker.py):
what is tested is what the review commands make of real runs' files, and the second run reuses
the first one's engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jiwer
import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from tests.e2e.cli_worker import CliWorker
from tests.e2e.test_batch_e2e import Factory, images, rows

pytestmark = pytest.mark.e2e


def review(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_score_report_and_compare_of_two_real_runs(
    tiny_checkpoint: Factory, tmp_path: Path, cli_worker: CliWorker
) -> None:
    qwen = tiny_checkpoint("image", "qwen2_5_vl")
    paths = images(tmp_path / "photos", 5)
    lines = [
        {"id": f"p{i}", "image": str(p), "meta": {"answer": f"a square of colour {i}"}}
        for i, p in enumerate(paths)
    ]
    lines.append({"id": "broken", "image": str(tmp_path / "missing.png"), "meta": {"answer": "x"}})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    long, short = tmp_path / "long.jsonl", tmp_path / "short.jsonl"
    engine_args = {**qwen.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    try:
        for out, tokens in ((long, "6"), (short, "3")):
            run = cli_worker.run(
                [
                    "image", "-m", "qwen2_5_vl", "--model", str(qwen.path), "-tp", "1", *flags,
                    "--input", str(manifest), "-o", str(out), "--max-tokens", tokens,
                ],
                {"HF_HUB_OFFLINE": "1"},
            )  # fmt: skip
            assert run.returncode == 3, run.stderr[-3000:]  # the missing file fails, the rest run
    finally:
        cli_worker.release()

    scored = review(
        "score", "long.jsonl", "-r", "meta.answer", "--metric", "wer", "--metric", "chrf", "--in-place",
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    summary = json.loads(scored.stdout)["metrics"]
    assert (summary["wer"]["scored"], summary["wer"]["failed"]) == (5, 1)
    normalizer = EnglishTextNormalizer()
    got = {r["id"]: r for r in rows(long)}
    expected = [
        jiwer.wer(
            " ".join(normalizer(f"a square of colour {i}").split()),
            " ".join(normalizer(got[f"p{i}"]["text"]).split()),
        )
        for i in range(5)
    ]
    assert summary["wer"]["mean"] == pytest.approx(sum(expected) / 5)
    assert review("score", "short.jsonl", "-r", "meta.answer", "--metric", "wer", "--in-place",
                  cwd=tmp_path).returncode == 0  # fmt: skip

    page = review("report", "long.jsonl", "-o", "report.html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/jpeg;base64,") == 5 and "no such file" in html
    # Every line says when it finished; the report charts results per second from them.
    assert all(r["finished_at"].endswith("Z") for r in rows(long))
    assert "<figcaption>6 results in " in html

    compared = review(
        "compare", "long.jsonl", "short.jsonl", "--json", "-o", "c.html", cwd=tmp_path
    )
    assert compared.returncode == 0, compared.stderr
    doc: dict[str, Any] = json.loads(compared.stdout)
    cut = {r["id"]: r for r in rows(short)}
    assert doc["common"] == 6 and doc["both_ok"] == 5 and doc["failed_a"] == doc["failed_b"] == 1
    basic = jiwer.Compose(
        [
            jiwer.ToLowerCase(),
            jiwer.RemovePunctuation(),
            jiwer.RemoveMultipleSpaces(),
            jiwer.Strip(),
        ]
    )
    pairs = [i for i in cut if cut[i]["error"] is None]
    assert doc["agree"] == sum(basic(got[i]["text"]) == basic(cut[i]["text"]) for i in pairs)
    assert doc["metrics"]["wer"]["paired"] == 5
    assert (tmp_path / "c.html").stat().st_size > 10_000
