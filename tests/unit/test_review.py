"""mmrun score, report and compare on generated result files: the metrics against the
libraries' own results, the counts of what cannot be scored, the bootstrap's seed, the
result files of every kind of run, and one line and exit 2 for each bad input."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jiwer
import pytest
import sacrebleu
from rapidfuzz.distance import Levenshtein
from whisper_normalizer.english import EnglishTextNormalizer

from mmrun.errors import EXIT_BELOW_THRESHOLD, EXIT_USAGE
from tests.helpers.cli import in_process
from tests.helpers.results import batch_lines, media_files, write_jsonl

HYPS = ["The cat sat on the mat.", "Two dogs, running!", "it is 20 dollars", "hello world"]
REFS = ["the cat sat on a mat", "Two dogs are running", "It's $20.", "goodbye world"]


def invoke(*args: str) -> tuple[int, str, str]:
    result = in_process(list(args))
    return result.exit_code, result.stdout, result.stderr


def line(ident: str, text: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "index": extra.pop("index", 0),
        "media": [],
        "question": "q",
        "text": text,
        "prompt_tokens": None if text is None else 10,
        "completion_tokens": None if text is None else 4,
        "finish_reason": None if text is None else "stop",
        "meta": extra.pop("meta", None),
        "error": None if text is not None else {"stage": "media", "message": "bad file"},
        **extra,
    }


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    rows = [
        line(f"p{i}", h, index=i, meta={"answer": r})
        for i, (h, r) in enumerate(zip(HYPS, REFS, strict=True))
    ]
    rows.append(line("failed", None, index=4, meta={"answer": "anything"}))
    rows.append(line("noref", "some answer", index=5))
    return write_jsonl(tmp_path / "out.jsonl", rows)


def score_json(*args: str) -> dict[str, Any]:
    code, out, err = invoke("score", *args, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def scored_lines(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_wer_and_cer_are_jiwers_on_whisper_normalized_text(pairs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    doc = score_json(
        str(pairs), "-r", "meta.answer", "--metric", "wer", "--metric", "cer", "-o", str(out)
    )
    normalizer = EnglishTextNormalizer()

    def norm(text: str) -> str:
        return " ".join(normalizer(text).split())

    rows = scored_lines(out)
    for i, (hyp, ref) in enumerate(zip(HYPS, REFS, strict=True)):
        assert rows[f"p{i}"]["score"]["wer"] == pytest.approx(jiwer.wer(norm(ref), norm(hyp)))
        assert rows[f"p{i}"]["score"]["cer"] == pytest.approx(jiwer.cer(norm(ref), norm(hyp)))
        assert rows[f"p{i}"]["reference"] == ref
    corpus = jiwer.wer([norm(r) for r in REFS], [norm(h) for h in HYPS])
    assert doc["metrics"]["wer"]["corpus"] == pytest.approx(corpus)
    assert doc["normalize"] == "whisper"
    # "It's $20." and "it is 20 dollars" are the same after Whisper's normalizer
    assert rows["p2"]["score"]["wer"] == 0.0


def test_bleu_and_chrf_are_sacrebleus(pairs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    doc = score_json(
        str(pairs), "-r", "meta.answer", "--metric", "bleu", "--metric", "chrf", "-o", str(out)
    )
    rows = scored_lines(out)
    for i, (hyp, ref) in enumerate(zip(HYPS, REFS, strict=True)):
        assert rows[f"p{i}"]["score"]["bleu"] == pytest.approx(
            sacrebleu.sentence_bleu(hyp, [ref]).score
        )
        assert rows[f"p{i}"]["score"]["chrf"] == pytest.approx(
            sacrebleu.sentence_chrf(hyp, [ref]).score
        )
    assert doc["metrics"]["bleu"]["corpus"] == pytest.approx(
        sacrebleu.corpus_bleu(HYPS, [REFS]).score
    )
    assert doc["metrics"]["chrf"]["corpus"] == pytest.approx(
        sacrebleu.corpus_chrf(HYPS, [REFS]).score
    )


def test_anls_is_thresholded_normalized_levenshtein_over_references(tmp_path: Path) -> None:
    answers = {
        "a": ("Invoice 1234", ["invoice 1243", "INVOICE 1234"]),
        "b": ("total", ["subtotal due"]),
        "c": ("12/03/2020", ["12/03/2021"]),
    }
    rows = [
        line(k, hyp, index=i, meta={"answers": refs})
        for i, (k, (hyp, refs)) in enumerate(answers.items())
    ]
    path = write_jsonl(tmp_path / "docvqa.jsonl", rows)
    out = tmp_path / "scored.jsonl"
    score_json(str(path), "-r", "meta.answers", "--metric", "anls", "-o", str(out))
    got = scored_lines(out)
    for key, (hyp, refs) in answers.items():
        best = 0.0
        for ref in refs:
            distance = Levenshtein.normalized_distance(hyp.lower(), ref.lower())
            best = max(best, 1 - distance if distance < 0.5 else 0.0)
        assert got[key]["score"]["anls"] == pytest.approx(best)
    assert got["a"]["score"]["anls"] == 1.0 and got["b"]["score"]["anls"] == 0.0


def test_exact_contains_and_choice(tmp_path: Path) -> None:
    cases = [
        ("x1", "A red Car.", "a red car", 1, 1, None),
        ("x2", "It is a red car, I think", "a red car", 0, 1, None),
        ("x3", "a redcar", "a red car", 0, 0, None),
        ("c1", "(B) a dog", "B", 0, 1, 1),
        ("c2", "Answer: c.", "C", 0, 1, 1),
        ("c3", "Because of A", "A", 0, 1, 0),
    ]
    rows = [line(k, h, index=i, meta={"ref": r}) for i, (k, h, r, *_) in enumerate(cases)]
    path = write_jsonl(tmp_path / "out.jsonl", rows)
    out = tmp_path / "scored.jsonl"
    score_json(
        str(path),
        "-r",
        "meta.ref",
        "--metric",
        "exact",
        "--metric",
        "contains",
        "--metric",
        "choice",
        "-o",
        str(out),
        "--normalize",
        "basic",
    )
    got = scored_lines(out)
    for key, _, _, exact, contains, choice in cases:
        assert got[key]["score"]["exact"] == exact, key
        assert got[key]["score"]["contains"] == contains, key
        if choice is not None:
            assert got[key]["score"]["choice"] == choice, key


def test_failed_items_and_missing_references_are_counted_never_scored(
    pairs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored.jsonl"
    doc = score_json(str(pairs), "-r", "meta.answer", "--metric", "exact", "-o", str(out))
    exact = doc["metrics"]["exact"]
    assert (exact["scored"], exact["failed"], exact["missing_reference"]) == (4, 1, 1)
    rows = scored_lines(out)
    assert rows["failed"]["score"] == {"exact": None} and rows["noref"]["score"] == {"exact": None}
    values = [rows[f"p{i}"]["score"]["exact"] for i in range(4)]
    assert exact["mean"] == pytest.approx(sum(values) / 4)


def test_the_bootstrap_interval_is_reproducible_with_a_seed(tmp_path: Path) -> None:
    pngs, wavs = media_files(tmp_path / "media")
    path = write_jsonl(tmp_path / "out.jsonl", batch_lines(300, pngs, wavs, tmp_path))
    first = score_json(str(path), "-r", "meta.answer", "--metric", "wer", "--seed", "7")
    again = score_json(str(path), "-r", "meta.answer", "--metric", "wer", "--seed", "7")
    other = score_json(str(path), "-r", "meta.answer", "--metric", "wer", "--seed", "8")
    ci = first["metrics"]["wer"]["ci95"]
    assert ci == again["metrics"]["wer"]["ci95"] and ci != other["metrics"]["wer"]["ci95"]
    assert ci[0] < first["metrics"]["wer"]["mean"] < ci[1]


def test_references_from_a_file_keyed_by_id(pairs: Path, tmp_path: Path) -> None:
    refs = tmp_path / "refs.csv"
    refs.write_text("key,text\n" + "".join(f"p{i},{r}\n" for i, r in enumerate(REFS)))
    doc = score_json(
        str(pairs),
        "-r",
        str(refs),
        "--reference-id",
        "key",
        "--reference-field",
        "text",
        "--metric",
        "bleu",
    )
    assert doc["metrics"]["bleu"]["corpus"] == pytest.approx(
        sacrebleu.corpus_bleu(HYPS, [REFS]).score
    )
    assert doc["metrics"]["bleu"]["missing_reference"] == 1  # "noref" has no line in refs.csv
    jsonl = tmp_path / "refs.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"id": f"p{i}", "reference": r}) + "\n" for i, r in enumerate(REFS))
    )
    assert score_json(str(pairs), "-r", str(jsonl), "--metric", "bleu")["metrics"] == doc["metrics"]


def test_in_place_writes_a_sidecar_and_leaves_the_ledger_alone(pairs: Path) -> None:
    before = hashlib.sha256(pairs.read_bytes()).hexdigest()
    score_json(str(pairs), "-r", "meta.answer", "--metric", "exact", "--in-place")
    score_json(str(pairs), "-r", "meta.answer", "--metric", "wer", "--in-place")
    assert hashlib.sha256(pairs.read_bytes()).hexdigest() == before
    sidecar = scored_lines(pairs.with_name("out.jsonl.scores.jsonl"))
    assert set(sidecar["p0"]["score"]) == {"exact", "wer"}  # the second run kept the first's
    code, _, err = invoke(
        "score", str(pairs), "-r", "meta.answer", "--metric", "wer", "-o", str(pairs)
    )
    assert code == EXIT_USAGE and "never rewrites" in err
    assert hashlib.sha256(pairs.read_bytes()).hexdigest() == before


def test_fail_below_exits_4(pairs: Path) -> None:
    code, out, _ = invoke(
        "score",
        str(pairs),
        "-r",
        "meta.answer",
        "--metric",
        "exact",
        "--fail-below",
        "0.9",
        "--json",
    )
    assert code == EXIT_BELOW_THRESHOLD == 4 and json.loads(out)["failed_threshold"] == ["exact"]
    code, _, _ = invoke(
        "score", str(pairs), "-r", "meta.answer", "--metric", "exact", "--fail-below", "0.1"
    )
    assert code == 0
    code, _, _ = invoke(
        "score", str(pairs), "-r", "meta.answer", "--metric", "wer", "--fail-above", "0.01"
    )
    assert code == 4
    all_failed = write_jsonl(
        pairs.with_name("failed.jsonl"), [line("x", None, meta={"answer": "a"})]
    )
    code, _, err = invoke(
        "score", str(all_failed), "-r", "meta.answer", "--metric", "exact", "--fail-below", "0"
    )
    assert code == 4, err  # nothing scored: no mean passes a gate


def test_every_kind_of_result_file_loads(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mmrun.review.load import load

    # A resumed ledger: an error line, then the retried id's success; a torn last line.
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text(
        json.dumps(line("a", None, index=0))
        + "\n"
        + json.dumps(line("b", "two", index=1, replica=1))
        + "\n"
        + json.dumps(line("a", "one", index=0, replica=0))
        + "\n"
        + '{"id": "c", "text": "cut o'
    )
    got = load(resumed)
    assert [(r["id"], r["text"], r["replica"]) for r in got.rows] == [
        ("a", "one", 0),
        ("b", "two", 1),
    ]
    assert got.torn_last_line
    # A --json document of a run named on the command line.
    document = {
        "schema": "mmrun.result/1",
        "model": {"key": "qwen2_5_vl", "model": "m"},
        "modality": "image",
        "question": "q?",
        "media": [{"source": "a.png"}, {"source": "b.png"}],
        "media_per_prompt": [[0], [1]],
        "timings": {"total_s": 2.0, "generate_s": 1.0},
        "outputs": [
            {
                "index": 0,
                "text": "x",
                "prompt_tokens": 3,
                "completion_tokens": 2,
                "finish_reason": "stop",
            },
            {
                "index": 1,
                "text": "y",
                "prompt_tokens": 3,
                "completion_tokens": 2,
                "finish_reason": "stop",
            },
        ],
    }
    single = tmp_path / "single.json"
    single.write_text(json.dumps(document, indent=2))
    got = load(single)
    assert [(r["id"], r["media"], r["text"]) for r in got.rows] == [
        ("0", ["a.png"], "x"),
        ("1", ["b.png"], "y"),
    ]
    assert got.run["key"] == "qwen2_5_vl"
    # Parquet results, nested fields as JSON text.
    rows = [line("p", "text", meta={"answer": "text"}, parsed={"k": 1})]
    table = pa.table(
        {k: [json.dumps(r[k]) if isinstance(r[k], dict) else r[k] for r in rows] for k in rows[0]}
    )
    pq.write_table(table, tmp_path / "out.parquet")
    got = load(tmp_path / "out.parquet")
    assert got.rows[0]["meta"] == {"answer": "text"} and got.rows[0]["parsed"] == {"k": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "missing.jsonl"], "no such result file: missing.jsonl"),
        (
            ["score", "bad.jsonl", "-r", "meta.answer", "--metric", "wer"],
            "bad.jsonl:2 is not a JSON line",
        ),
        (
            ["score", "good.jsonl", "-r", "meta.answer", "--metric", "rouge"],
            "unknown metric 'rouge'",
        ),
        (
            ["score", "good.jsonl", "-r", "other.jsonl", "--metric", "wer"],
            "no id of good.jsonl has a reference",
        ),
        (
            ["score", "good.jsonl", "-r", "nothere.csv", "--metric", "wer"],
            "no such reference file: nothere.csv",
        ),
        (
            ["score", "good.jsonl", "-r", "meta.nothing", "--metric", "wer"],
            "has the field 'meta.nothing'",
        ),
        (
            ["score", "good.jsonl", "-r", "meta.answer", "--metric", "wer", "--normalize", "x"],
            "unknown normalization 'x'",
        ),
        (["compare", "good.jsonl", "other.jsonl"], "good.jsonl and other.jsonl share no id"),
        (["compare", "good.jsonl", "empty.jsonl"], "empty.jsonl holds no results"),
    ],
)
def test_bad_inputs_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    write_jsonl(tmp_path / "good.jsonl", [line("g1", "a", meta={"answer": "a"})])
    (tmp_path / "bad.jsonl").write_text(
        json.dumps(line("g1", "a")) + "\n{oops\n" + json.dumps(line("g2", "b")) + "\n"
    )
    write_jsonl(tmp_path / "other.jsonl", [{"id": "z9", "reference": "a", **line("z9", "a")}])
    (tmp_path / "empty.jsonl").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("mmrun: error: "), proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_compare_agreement_and_paired_deltas(tmp_path: Path) -> None:
    a_rows = [
        line(f"i{i}", t, index=i, meta={"ref": "a cat"})
        for i, t in enumerate(["A cat.", "a dog", "a cat", None, "two cats"])
    ]
    b_rows = [
        line(f"i{i}", t, index=i, meta={"ref": "a cat"})
        for i, t in enumerate(["a cat", "a cat", "a bird", "a cat", "two cats"])
    ]
    a = write_jsonl(tmp_path / "a.jsonl", a_rows)
    b = write_jsonl(tmp_path / "b.jsonl", b_rows)
    for path in (a, b):
        score_json(
            str(path), "-r", "meta.ref", "--metric", "exact", "--in-place", "--normalize", "basic"
        )
    code, out, err = invoke("compare", str(a), str(b), "--json", "-o", str(tmp_path / "c.html"))
    assert code == 0, err
    doc = json.loads(out)
    # Pairs where both answered: i0 (equal after normalization), i1, i2, i4 (equal).
    assert (doc["both_ok"], doc["agree"], doc["failed_a"], doc["failed_b"]) == (4, 2, 1, 0)
    exact = doc["metrics"]["exact"]
    # exact per id, A: 1 0 1 - 0, B: 1 1 0 1 0; paired where both scored: i0 i1 i2 i4
    assert exact["paired"] == 4 and exact["delta"] == pytest.approx((0 + 1 - 1 + 0) / 4)
    assert {d["id"] for d in doc["differ_most"]} == {"i1", "i2"}
    page = (tmp_path / "c.html").read_text()
    assert "two cats" in page and "a.jsonl" in page


def test_report_writes_one_page_with_embedded_media(tmp_path: Path) -> None:
    pngs, wavs = media_files(tmp_path / "media")
    path = write_jsonl(tmp_path / "out.jsonl", batch_lines(40, pngs, wavs, tmp_path))
    code, _, err = invoke("report", str(path), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert page.count("data:image/jpeg;base64,") == len(pngs)  # each distinct image once
    assert page.count("data:audio/ogg;base64,") == len(wavs)
    assert "http://" not in page.replace("http://www.w3.org", "")  # no fetch from anywhere
    linked = tmp_path / "sub" / "linked.html"
    code, _, err = invoke("report", str(path), "-o", str(linked), "--link-media")
    assert code == 0, err
    text = linked.read_text()
    assert "data:image/jpeg" not in text and '"src":"../media/photo0.png"' in text


@pytest.mark.parametrize(
    "command", [["report", "--help"], ["score", "--help"], ["compare", "--help"], ["--help"]]
)
def test_review_help_imports_no_heavy_library(command: list[str]) -> None:
    code = (
        "import sys\nfrom mmrun.cli.main import app\n"
        f"try:\n    app({command!r})\nexcept SystemExit:\n    pass\n"
        "heavy = ('vllm', 'torch', 'transformers', 'matplotlib', 'jiwer', 'sacrebleu', "
        "'pyarrow', 'PIL', 'rapidfuzz', 'numpy')\n"
        "print('HEAVY', sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in out.stderr, out.stderr


def test_bootstrap_needs_two_values() -> None:
    from mmrun.review.score import bootstrap

    assert bootstrap([0.5], seed=0) is None
    low, high = bootstrap([0.0, 1.0] * 50, seed=0) or (math.nan, math.nan)
    assert 0.35 < low < 0.5 < high < 0.65


def test_a_video_becomes_keyframes(tmp_path: Path) -> None:
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(
        str(tmp_path / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48)
    )
    for i in range(30):
        writer.write(np.full((48, 64, 3), i * 8, np.uint8))
    writer.release()
    path = write_jsonl(tmp_path / "video.jsonl", [{**line("v", "a clip"), "media": ["clip.mp4"]}])
    code, _, err = invoke("report", str(path))
    assert code == 0, err
    page = (tmp_path / "video.html").read_text()
    data = json.loads(page.split('id="mmrun-data">')[1].split("</script>")[0])
    (entry,) = data["media"].values()
    assert entry["kind"] == "video" and len(entry["frames"]) == 4
    assert len(set(entry["frames"])) == 4  # four different moments of the fading clip


def chart_captions(page: str) -> list[str]:
    return [part.split("</figcaption>")[0] for part in page.split("<figcaption>")[1:]]


def test_batch_lines_carry_when_they_finished_and_the_report_charts_throughput(
    fake_vllm: Any, server: Any, tmp_path: Path
) -> None:
    """A batch (the stand-in engine) writes finished_at on every line; a resumed run adds
    its own; the report draws results per second from them."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(f'{{"id": "p{i}", "image": "{server.url("/blue.png")}"}}\n' for i in range(4))
    )
    out = tmp_path / "out.jsonl"
    before = time.time()
    for limit in ("2", "4"):  # the second run resumes the first
        result = in_process(
            ["image", "-m", "mistral3", "--input", str(manifest), "-o", str(out), "--limit", limit],
        )
        assert result.exit_code == 0, result.stderr
    rows = [json.loads(raw) for raw in out.read_text().splitlines()]
    moments = [
        datetime.datetime.fromisoformat(r["finished_at"].replace("Z", "+00:00")) for r in rows
    ]
    assert len(rows) == 4 and all(r["finished_at"].endswith("Z") for r in rows)
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["finished_at"]) for r in rows
    )
    assert (
        before - 0.001
        <= min(m.timestamp() for m in moments)
        <= max(m.timestamp() for m in moments)
        <= time.time()
    )
    hits = len(server.hits)
    code, _, err = invoke("report", str(out))
    assert code == 0, err
    page = (tmp_path / "out.html").read_text()
    captions = chart_captions(page)
    assert any(c.startswith("4 results in ") for c in captions), captions
    # The image the batch downloaded is embedded from mmrun's cache, not fetched again.
    assert page.count("data:image/jpeg;base64,") == 1 and len(server.hits) == hits


def stamped(ident: str, moment: float, **extra: Any) -> dict[str, Any]:
    from mmrun.records import timestamp

    return line(ident, f"text {ident}", finished_at=timestamp(moment), **extra)


def test_throughput_bins_span_resumed_and_parallel_runs(tmp_path: Path) -> None:
    from mmrun.review.charts import PAUSE_S, finish_times, throughput

    start = 1_800_000_000.0
    # Two replicas (-dp 2) writing 10 results/s each for 20 s, then the file resumed an hour
    # later by one engine at 5 results/s for 10 s; and lines written before finished_at.
    first = [stamped(f"a{r}{i}", start + i / 10, replica=r) for r in (0, 1) for i in range(200)]
    resumed = [stamped(f"b{i}", start + 3600 + 20 + i / 5) for i in range(50)]
    older = [line(f"old{i}", "no time") for i in range(5)]
    rows = [*first, *resumed, *older]
    times = finish_times(rows)
    assert len(times) == 450 and times == sorted(times)
    bins = throughput(times)
    assert bins is not None and bins.results == 450
    assert len(bins.pauses) == 1 and bins.pauses[0][1] == pytest.approx(3600 + 0.1, abs=0.01)
    assert bins.pauses[0][1] > PAUSE_S and bins.active_s == pytest.approx(19.9 + 9.8, abs=0.01)
    bars = list(zip(bins.starts, bins.widths, bins.rates, strict=True))
    assert sum(rate * width for _, width, rate in bars) == pytest.approx(450)
    # Equal bins within each stretch, none cut short: the first run's at 20 results/s, the
    # resumed run's at 5 (each bin within two results of it: the replicas finish in pairs,
    # and the last result of a stretch joins its last bin), and the cut where it ends.
    cut = bins.pauses[0][0]
    early = [(w, r) for s, w, r in bars if s < cut]
    late = [(w, r) for s, w, r in bars if s >= cut]
    assert len({round(w, 9) for w, _ in early}) == len({round(w, 9) for w, _ in late}) == 1
    assert all(abs(r - 20) * w <= 2 for w, r in early) and all(abs(r - 5) * w <= 2 for w, r in late)
    assert cut == pytest.approx(19.9) and bins.starts[-1] + bins.widths[-1] == pytest.approx(29.7)
    path = write_jsonl(tmp_path / "out.jsonl", rows)
    code, _, err = invoke("report", str(path))
    assert code == 0, err
    captions = chart_captions((tmp_path / "out.html").read_text())
    assert any(
        c.startswith("450 results in 29.7 s") and "1 pause longer than 5.0 min cut out" in c
        for c in captions
    ), captions


def test_lines_without_finished_at_get_no_throughput_chart(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "old.jsonl", [line(f"p{i}", f"t{i}") for i in range(5)])
    code, _, err = invoke("report", str(path))
    assert code == 0, err
    captions = chart_captions((tmp_path / "old.html").read_text())
    assert captions and not any(" results in " in c for c in captions)


def test_url_media_are_embedded_from_mmruns_cache_and_nothing_is_fetched(
    server: Any, tmp_path: Path, isolated_cache: Path
) -> None:
    from mmrun.media.download import Downloader

    cached, remote = server.url("/blue.png"), server.url("/elsewhere.png")
    downloader = Downloader()
    try:
        kept = downloader.fetch(cached)  # as a batch's media workers fetch a URL
    finally:
        downloader.close()
    assert kept.is_file() and isolated_cache in kept.parents
    hits = len(server.hits)
    path = write_jsonl(
        tmp_path / "out.jsonl",
        [{**line("a", "blue"), "media": [cached]}, {**line("b", "other"), "media": [remote]}],
    )
    code, _, err = invoke("report", str(path), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    data = json.loads(page.split('id="mmrun-data">')[1].split("</script>")[0])
    by_name = {entry["name"]: entry for entry in data["media"].values()}
    assert by_name[cached]["kind"] == "image" and by_name[cached]["src"].startswith(
        "data:image/jpeg;base64,"
    )
    assert by_name[cached]["note"] == "from mmrun's cache"
    assert by_name[remote] == {
        "kind": "link",
        "name": remote,
        "src": remote,
        "note": "not in mmrun's cache",
    }
    code, _, err = invoke("report", str(path), "-o", str(tmp_path / "linked.html"), "--link-media")
    assert code == 0, err
    linked = (tmp_path / "linked.html").read_text()
    assert "data:image/jpeg" not in linked and f'"src":"{cached}"' in linked
    assert len(server.hits) == hits  # building the pages asked the server nothing


@pytest.mark.parametrize("browser", ["opens", "none", "fails"])
def test_open_hands_the_page_to_the_web_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: str
) -> None:
    import webbrowser

    asked: list[str] = []

    def fake_open(url: str, new: int = 0, autoraise: bool = True) -> bool:
        asked.append(url)
        if browser == "fails":
            raise webbrowser.Error("could not locate runnable browser")
        return browser == "opens"

    monkeypatch.setattr(webbrowser, "open", fake_open)
    path = write_jsonl(tmp_path / "out.jsonl", [line("p0", "text")])
    code, _, err = invoke("report", str(path), "-o", str(tmp_path / "sub" / "r.html"), "--open")
    page = tmp_path / "sub" / "r.html"
    assert code == 0, err and page.is_file()
    assert asked == [page.resolve().as_uri()] and asked[0].startswith("file:///")
    assert ("no web browser" in err) == (browser != "opens")


def test_open_without_any_browser_writes_the_page_and_exits_0(tmp_path: Path) -> None:
    """No display and no browser on the PATH, as on a server: Python's webbrowser finds none."""
    path = write_jsonl(tmp_path / "out.jsonl", [line("p0", "text")])
    env = {
        k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")
    }
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", "report", str(path), "--open"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PATH": str(empty), "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    uri = (tmp_path / "out.html").resolve().as_uri()
    assert f"no web browser to open it with; open {uri} yourself" in proc.stderr


def test_a_run_finishing_in_bursts_charts_rates_its_caption_agrees_with(tmp_path: Path) -> None:
    """vLLM finishes the prompts of a step together: 64 results in bursts of 16 over 3 s are
    21.5 per second, and no bar may claim hundreds (bins of a few milliseconds did: 650/s)."""
    from mmrun.review.charts import throughput

    start = 1_800_000_000.0
    times = [start + step + i / 1000 for step in (0.0, 1.0, 2.0, 2.96) for i in range(16)]
    bins = throughput(times)
    assert bins is not None and bins.width == 1.0
    assert sum(r * w for r, w in zip(bins.rates, bins.widths, strict=True)) == pytest.approx(64)
    assert max(bins.rates) < 2 * 64 / bins.active_s
    rows = [stamped(f"p{i}", t) for i, t in enumerate(times)]
    code, _, err = invoke("report", str(write_jsonl(tmp_path / "out.jsonl", rows)))
    assert code == 0, err
    captions = chart_captions((tmp_path / "out.html").read_text())
    # Three bins of 0.99 s: 16, 16 and the last two bursts, 32 results (32.3 per second).
    assert captions[0] == (
        "64 results in 2.97 s, 21.5 per second on average, 32.3 in the busiest bin; "
        "bins of about 1 s"
    )


def test_blank_answers_are_no_answer_in_compare(tmp_path: Path) -> None:
    """Two runs that both answered blanks do not agree; the blanks are counted apart."""
    texts_a = ["", "  \n", "a cat", "a dog"]
    texts_b = ["", "\t", "a cat", ""]
    a = write_jsonl(
        tmp_path / "a.jsonl", [line(f"i{i}", t, index=i) for i, t in enumerate(texts_a)]
    )
    b = write_jsonl(
        tmp_path / "b.jsonl", [line(f"i{i}", t, index=i) for i, t in enumerate(texts_b)]
    )
    code, out, err = invoke("compare", str(a), str(b), "--json")
    assert code == 0, err
    doc = json.loads(out)
    # Only i2 has an answer in both; i0 and i1 are blank in both, i3 blank in B.
    assert (doc["both_ok"], doc["agree"], doc["agreement"]) == (1, 1, 1.0)
    assert (doc["blank_a"], doc["blank_b"], doc["failed_a"], doc["failed_b"]) == (2, 3, 0, 0)
    code, out, err = invoke("compare", str(a), str(b), "--normalize", "none")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == (
        "4 ids in both (0 only in A, 0 only in B); failed: A 0, B 0; blank answers: A 2, B 3"
    )
    assert lines[3] == "agreement: 100.0% (1 of 1 answer pairs equal after none normalization)"


def test_two_runs_of_blanks_have_no_agreement(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [line(f"i{i}", "", index=i) for i in range(3)])
    b = write_jsonl(tmp_path / "b.jsonl", [line(f"i{i}", " ", index=i) for i in range(3)])
    code, out, err = invoke("compare", str(a), str(b))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == (
        "3 ids in both (0 only in A, 0 only in B); failed: A 0, B 0; blank answers: A 3, B 3"
    )
    assert lines[3] == "agreement: no id has an answer in both"
    page_code, _, err = invoke("compare", str(a), str(b), "-o", str(tmp_path / "c.html"))
    assert page_code == 0, err
    assert "<td>A 3, B 3</td>" in (tmp_path / "c.html").read_text()


def test_compare_without_blanks_says_nothing_of_them(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [line("i0", "a cat")])
    code, out, err = invoke("compare", str(a), str(a))
    assert code == 0, err
    assert out.splitlines()[2] == "1 ids in both (0 only in A, 0 only in B); failed: A 0, B 0"


def test_blank_answers_are_counted_never_scored(tmp_path: Path) -> None:
    rows = [
        line("ok", "a cat", index=0, meta={"answer": "a cat"}),
        line("empty", "", index=1, meta={"answer": "a cat"}),
        line("spaces", " \n ", index=2, meta={"answer": "a cat"}),
        line("failed", None, index=3, meta={"answer": "a cat"}),
    ]
    path = write_jsonl(tmp_path / "out.jsonl", rows)
    out = tmp_path / "scored.jsonl"
    doc = score_json(str(path), "-r", "meta.answer", "--metric", "exact", "-o", str(out))
    exact = doc["metrics"]["exact"]
    assert (exact["scored"], exact["blank"], exact["failed"], exact["mean"]) == (1, 2, 1, 1.0)
    assert scored_lines(out)["empty"]["score"] == {"exact": None}
    code, table, err = invoke("score", str(path), "-r", "meta.answer", "--metric", "exact")
    assert code == 0, err
    assert table.splitlines()[0].split() == [
        "metric",
        "mean",
        "95%",
        "CI",
        "corpus",
        "scored",
        "no",
        "reference",
        "failed",
        "blank",
    ]
    assert table.splitlines()[1].split() == ["exact", "1.0000", "-", "-", "1", "0", "1", "2"]


def test_a_run_of_blanks_fails_a_score_gate(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "out.jsonl",
        [line(f"i{i}", " ", index=i, meta={"answer": "x"}) for i in range(2)],
    )
    code, out, err = invoke(
        "score", str(path), "-r", "meta.answer", "--metric", "exact", "--fail-below", "0.5"
    )
    assert code == EXIT_BELOW_THRESHOLD
    assert out.splitlines()[1].split() == ["exact", "-", "-", "-", "0", "0", "0", "2"]
    assert (
        err.splitlines()[-1] == f"mmrun: exact beyond the threshold (exit {EXIT_BELOW_THRESHOLD})"
    )
