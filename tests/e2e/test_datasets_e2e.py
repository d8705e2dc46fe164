"""Data sets as --input on the real vLLM engine and the tiny checkpoints: Parquet, CSV, a
`datasets` folder, a Hub data set from the Hugging Face cache, the real WebDataset shard and
an OpenAI batch file give each id once, with the texts the same prompts give as a manifest
(greedy, one prompt per engine step, so that no answer depends on its neighbours).

All runs of one model share one engine start (the CLI worker reuses the engine of equal
engine arguments): a manifest run, then each format. The recipes of docs/usage.md's
"Published data sets" (a benchmark TSV, LLaVA conversation JSON, Common Voice, LibriSpeech,
as tests/helpers/published.py builds them) run first, on the same engines, each one `mmrun`
run and one `mmrun score`.
"""

from __future__ import annotations

import base64
import json
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mmrun.review.score import option_letter, options_of
from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
from tests.helpers import published

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
Factory = Callable[[str, str], TinyCheckpoint]


@pytest.fixture
def worker(cli_worker: CliWorker) -> Iterator[CliWorker]:
    yield cli_worker
    cli_worker.release()


def run(
    worker: CliWorker,
    modality: str,
    key: str,
    checkpoint: TinyCheckpoint,
    *args: str,
    env: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """``mmrun <modality> ... --json`` in the worker; its result lines by id."""
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    command = [
        modality,
        "-m",
        key,
        "--model",
        str(checkpoint.path),
        "-tp",
        "1",
        "--max-tokens",
        "6",
        "--json",
        "--quiet",
        *flags,
        *args,
    ]
    done = worker.run(command, {"HF_HUB_OFFLINE": "1", **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {str(r.get("custom_id", r.get("id"))): r for r in rows}
    assert len(by_id) == len(rows)  # each id once
    return by_id


def texts(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    assert all(r["error"] is None for r in rows.values()), rows
    return {k: r["text"] for k, r in rows.items()}


def recipe(
    worker: CliWorker,
    modality: str,
    key: str,
    checkpoint: TinyCheckpoint,
    out: Path,
    *args: str,
) -> dict[str, dict[str, Any]]:
    """``mmrun <modality> ... -o out`` in the worker, with ``run``'s engine arguments (so
    that it reuses the engine of the test after it); its result lines by id."""
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    command = [modality, "-m", key, "--model", str(checkpoint.path), "-tp", "1",
               "--max-tokens", "6", *flags, *args, "-o", str(out)]  # fmt: skip
    done = worker.run(command, {"HF_HUB_OFFLINE": "1", "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    sys.stderr.write(f"$ mmrun {' '.join(args)}\n{done.stderr.splitlines()[-1]}\n")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["error"] is None and r["text"] is not None for r in rows), rows
    return {r["id"]: r for r in rows}


def score(results: Path, *args: str) -> dict[str, Any]:
    """The metrics of ``mmrun score results ... --json``; the table the command prints
    without --json goes to the test's stderr, for its log."""
    from tests.helpers.cli import in_process

    table = in_process(["score", str(results), *args])
    assert table.exit_code == 0, table.stderr
    sys.stderr.write(f"$ mmrun score {results.name} {' '.join(args)}\n{table.stdout}")
    done = in_process(["score", str(results), *args, "--json"])
    metrics: dict[str, Any] = json.loads(done.stdout)["metrics"]
    return metrics


def test_published_image_recipes_a_benchmark_tsv_and_llava_json_are_run_and_scored(
    tiny_checkpoint: Factory, cli_worker: CliWorker, tmp_path: Path
) -> None:
    """Runs before the image formats' test, which reuses its engine and releases it."""
    checkpoint = tiny_checkpoint("image", "qwen2_5_vl")
    tsv = published.mmbench_tsv(tmp_path, several=False)  # one image a prompt: one engine
    template = "Hint: {hint}\\nQuestion: {question}\\nA. {A}\\nB. {B}\\nC. {C}\\nD. {D}"
    out = tmp_path / "mmbench.jsonl"
    rows = recipe(
        cli_worker, "image", "qwen2_5_vl", checkpoint, out, "--input", str(tsv), "--columns",
        "id=index", "--question-template", template, "--keep-columns", "answer",
    )  # fmt: skip
    assert sorted(rows) == ["1000", "1001", "1002"]
    assert rows["1001"]["question"] == "Question: Is the picture dark?\nA. yes\nB. no"
    choice = score(out, "-r", "meta.answer", "--metric", "choice")["choice"]
    assert (choice["scored"], choice["failed"], choice["missing_reference"]) == (3, 0, 0)
    picked = [option_letter(r["text"], options_of(r)) == r["meta"]["answer"] for r in rows.values()]
    assert choice["mean"] == pytest.approx(sum(picked) / 3)

    llava = published.llava_json(tmp_path)
    out = tmp_path / "llava.jsonl"
    rows = recipe(
        cli_worker, "image", "qwen2_5_vl", checkpoint, out, "--input", str(llava),
        "--media-root", str(tmp_path / "images"),
    )  # fmt: skip
    assert rows["000000033471"]["question"] == "What colour is the square?"
    chrf = score(out, "-r", "meta.reference", "--metric", "chrf", "--in-place")["chrf"]
    assert chrf["scored"] == 2
    beside = [json.loads(line) for line in Path(f"{out}.scores.jsonl").read_text().splitlines()]
    assert {r["id"]: r["reference"] for r in beside} == {
        "000000033471": "The square is green.",
        "000000052846": "A red square.",
    }


def test_image_tables_a_shard_a_hub_data_set_and_an_openai_batch_match_a_manifest(
    tiny_checkpoint: Factory, worker: CliWorker, tmp_path: Path
) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    checkpoint = tiny_checkpoint("image", "qwen2_5_vl")
    with tarfile.open(FIXTURES / "webdataset-sample.tgz") as tar:
        pngs = [m for m in tar.getmembers() if m.name.endswith(".png")][:3]
        shard_images = {m.name.split(".")[0]: tar.extractfile(m).read() for m in pngs}  # type: ignore[union-attr]
    images = {
        "rgb": (FIXTURES / "test_image_rgb.jpg").read_bytes(),
        "rgba": (FIXTURES / "test_image_rgba.png").read_bytes(),
        **{f"wds{k}": v for k, v in shard_images.items()},
    }
    for name, data in images.items():
        (tmp_path / f"{name}.img").write_bytes(data)
    questions = {name: f"What is in picture {name}?" for name in images}
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"id": n, "image": f"{n}.img", "question": questions[n]}) + "\n"
            for n in images
        )
    )
    expected = texts(run(worker, "image", "qwen2_5_vl", checkpoint, "--input", str(manifest)))
    assert len(set(expected.values())) > 1  # the prompts' answers tell them apart

    # Parquet: {bytes, path} structs; the same rows as CSV of relative paths.
    names = list(images)
    pq.write_table(
        pa.table(
            {
                "uid": names,
                "img": [{"bytes": images[n], "path": f"{n}.img"} for n in names],
                "prompt": [questions[n] for n in names],
            }
        ),
        tmp_path / "t.parquet",
        row_group_size=2,
    )
    got = run(
        worker,
        "image",
        "qwen2_5_vl",
        checkpoint,
        "--input",
        str(tmp_path / "t.parquet"),
        "--columns",
        "id=uid,image=img,question=prompt",
    )
    assert texts(got) == expected
    (tmp_path / "t.csv").write_text(
        "id,image,question\n" + "".join(f"{n},{n}.img,{questions[n]}\n" for n in names)
    )
    assert (
        texts(run(worker, "image", "qwen2_5_vl", checkpoint, "--input", str(tmp_path / "t.csv")))
        == expected
    )

    # A datasets folder (save_to_disk, an Image feature) and the same data set on the Hub,
    # from a Hugging Face cache built by hand, offline.
    ds = datasets.Dataset.from_dict(
        {
            "id": names,
            # The bytes in the table, as push_to_hub stores an Image column.
            "image": [{"bytes": images[n], "path": f"{n}.img"} for n in names],
            "question": [questions[n] for n in names],
        }
    ).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    assert (
        texts(run(worker, "image", "qwen2_5_vl", checkpoint, "--input", str(tmp_path / "saved")))
        == expected
    )
    revision = "f" * 40
    repo = tmp_path / "hf" / "hub" / "datasets--acme--pictures"
    (repo / "snapshots" / revision / "data").mkdir(parents=True)
    ds.to_parquet(str(repo / "snapshots" / revision / "data" / "test-00000-of-00001.parquet"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    hub = run(
        worker,
        "image",
        "qwen2_5_vl",
        checkpoint,
        "--input",
        "hf://datasets/acme/pictures",
        "--split",
        "test",
        env={"HF_HUB_CACHE": str(tmp_path / "hf" / "hub")},
    )
    assert texts(hub) == expected

    # The real WebDataset shard, its first three samples, asked the run's question.
    plain = {f"wds{k}": f"{k}.img" for k in shard_images}
    for key, name in plain.items():
        (tmp_path / name).write_bytes(images[key])
    question = "What digit is this?"
    manifest.write_text(
        "".join(json.dumps({"id": k[3:], "image": f"{k[3:]}.img"}) + "\n" for k in plain)
    )
    expected_wds = texts(
        run(worker, "image", "qwen2_5_vl", checkpoint, "--input", str(manifest), "-q", question)
    )
    shard = run(
        worker,
        "image",
        "qwen2_5_vl",
        checkpoint,
        "--input",
        str(FIXTURES / "webdataset-sample.tgz"),
        "--limit",
        "3",
        "-q",
        question,
    )
    assert texts(shard) == expected_wds

    # An OpenAI batch file, its own messages through LLM.chat, against a chat manifest run.
    chat_expected = texts(
        run(
            worker,
            "image",
            "qwen2_5_vl",
            checkpoint,
            "--input",
            str(tmp_path / "t.csv"),
            "--method",
            "chat",
        )
    )
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        "".join(
            json.dumps(
                {
                    "custom_id": n,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "any",
                        "messages": [
                            {
                                "role": "user",
                                "content": [
                                    {"type": "text", "text": questions[n]},
                                    {
                                        "type": "image_url",
                                        "image_url": {
                                            "url": "data:image/png;base64,"
                                            + base64.b64encode(images[n]).decode()
                                        },
                                    },
                                ],
                            }
                        ],
                    },
                }
            )
            + "\n"
            for n in names
        )
    )
    answers = run(
        worker,
        "image",
        "qwen2_5_vl",
        checkpoint,
        "--input",
        str(batch),
        "--output-format",
        "openai",
    )
    assert {
        k: r["response"]["body"]["choices"][0]["message"]["content"] for k, r in answers.items()
    } == chat_expected
    assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in answers.values())


def test_published_speech_recipes_common_voice_and_librispeech_are_scored_by_wer(
    tiny_checkpoint: Factory, cli_worker: CliWorker, tmp_path: Path
) -> None:
    """Runs before the audio formats' test, which reuses its engine and releases it."""
    checkpoint = tiny_checkpoint("audio", "qwen2_audio")
    tsv = published.common_voice(tmp_path)
    out = tmp_path / "cv.jsonl"
    rows = recipe(
        cli_worker, "audio", "qwen2_audio", checkpoint, out, "--input", str(tsv), "--columns",
        "audio=path", "--media-root", str(tsv.parent / "clips"), "--keep-columns", "sentence",
    )  # fmt: skip
    assert rows["0"]["media"] == [str(tsv.parent / "clips" / "common_voice_en_4100.mp3")]
    wer = score(out, "-r", "meta.sentence", "--metric", "wer")["wer"]
    assert (wer["scored"], wer["failed"]) == (2, 0) and wer["corpus"] is not None

    split = published.librispeech(tmp_path)
    out = tmp_path / "test-clean.jsonl"
    rows = recipe(cli_worker, "audio", "qwen2_audio", checkpoint, out, "--audio", str(split))
    assert len(rows) == 3
    wer = score(out, "-r", str(split), "--metric", "wer")["wer"]
    assert (wer["scored"], wer["missing_reference"]) == (3, 0)


def test_audio_arrays_and_bytes_in_a_parquet_match_a_manifest(
    tiny_checkpoint: Factory, worker: CliWorker, tmp_path: Path
) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import soundfile

    checkpoint = tiny_checkpoint("audio", "qwen2_audio")
    mp3 = (FIXTURES / "test_audio_16000.mp3").read_bytes()
    samples, rate = soundfile.read(FIXTURES / "test_audio_16000.mp3", dtype="float32")
    mono = samples.mean(axis=1).astype(np.float32) if samples.ndim == 2 else samples
    (tmp_path / "clip.mp3").write_bytes(mp3)
    soundfile.write(tmp_path / "array.wav", mono, rate, subtype="FLOAT")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"id": "bytes", "audio": "clip.mp3"})
        + "\n"
        + json.dumps({"id": "array", "audio": "array.wav"})
        + "\n"
    )
    expected = texts(run(worker, "audio", "qwen2_audio", checkpoint, "--input", str(manifest)))
    table = tmp_path / "a.parquet"
    pq.write_table(
        pa.table(
            {
                "id": ["bytes", "array"],
                "audio": [
                    {"bytes": mp3, "path": "clip.mp3", "array": None, "sampling_rate": None},
                    {"bytes": None, "path": None, "array": mono.tolist(), "sampling_rate": rate},
                ],
            }
        ),
        table,
    )
    assert texts(run(worker, "audio", "qwen2_audio", checkpoint, "--input", str(table))) == expected
