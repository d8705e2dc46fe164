"""Data sets where they live, as --input: Parquet, CSV/TSV, Arrow and `datasets` folders, a
Hub data set through the Hugging Face cache, WebDataset shards and OpenAI batch files, read by
the real readers (pyarrow, datasets, tarfile) over the real public files in
tests/fixtures/data (see its README) and tables built from them; the engine is the stand-in
vLLM (tests/e2e/test_datasets_e2e.py runs the real one)."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_PARTIAL, EXIT_USAGE, UsageError
from mmrun.inputs import InputOptions, open_input
from mmrun.inputs.columns import media_of
from mmrun.modalities.audio import AUDIO
from mmrun.modalities.image import IMAGE
from tests.helpers.cli import in_process

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
RGB = FIXTURES / "test_image_rgb.jpg"
RGBA = FIXTURES / "test_image_rgba.png"
MP3 = FIXTURES / "test_audio_16000.mp3"
SHARD = FIXTURES / "webdataset-sample.tgz"
MODEL = ("image", "-m", "mistral3")  # writes its own prompt: no processor, runs offline


def cli(*args: str) -> Any:
    return in_process([*MODEL, *args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def items(source: str | Path, modality: Any = IMAGE, **options: Any) -> list[Any]:
    reader = open_input(str(source), modality, InputOptions(**options))
    reader.check()
    return list(reader)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A Parquet of the real images: a {bytes, path} struct, raw bytes, a relative path and
    a list of two, with an id, a question and a label column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "rgb.jpg").write_bytes(RGB.read_bytes())
    rows = {
        "uid": ["s", "b", "p", "l"],
        "img": [
            [{"bytes": RGBA.read_bytes(), "path": "rgba.png"}],
            [{"bytes": RGB.read_bytes(), "path": None}],
            [{"bytes": None, "path": "rgb.jpg"}],
            [{"bytes": RGB.read_bytes(), "path": "a.jpg"}, {"bytes": None, "path": "rgb.jpg"}],
        ],
        "prompt": ["What colour?", None, "Which animal?", "Compare them."],
        "label": [3, 1, 4, 1],
    }
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(rows), path, row_group_size=2)
    return path


def test_a_parquet_with_named_columns_keeps_ids_questions_and_kept_columns(
    table: Path, fake_vllm: Any
) -> None:
    got = items(table, columns="id=uid,image=img,question=prompt", keep_columns="label")
    assert [i.id for i in got] == ["s", "b", "p", "l"]
    assert [len(i.sources) for i in got] == [1, 1, 1, 2]
    assert got[0].media_names == ("rgba.png",) and got[1].media_names == ("row 1 img[0]",)
    assert got[2].sources == (str(table.parent / "rgb.jpg"),)  # relative to the table
    assert got[0].sources[0].startswith("data:") and got[0].question == "What colour?"
    assert got[1].question is None and got[3].meta == {"label": 1}
    out = table.parent / "out.parquet"
    result = cli(
        "--input",
        str(table),
        "--columns",
        "id=uid,image=img,question=prompt",
        "--keep-columns",
        "label",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    import pyarrow.parquet as pq

    rows = {r["id"]: r for r in pq.read_table(out).to_pylist()}
    assert sorted(rows) == ["b", "l", "p", "s"]
    assert rows["s"]["label"] == 3 and rows["s"]["question"] == "What colour?"
    assert all(r["text"] and r["error"] is None for r in rows.values())
    assert len(lines(Path(f"{out}.jsonl"))) == 4  # the ledger a resumed run reads
    again = cli(
        "--input",
        str(table),
        "--columns",
        "id=uid,image=img,question=prompt",
        "--keep-columns",
        "label",
        "-o",
        str(out),
    )
    assert again.exit_code == 0 and "0 done, 0 failed, 4 skipped" in again.stderr
    assert pq.read_table(out).num_rows == 4


def test_columns_are_found_by_feature_or_name_and_a_missing_one_lists_those_found(
    tmp_path: Path,
) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(f"id,image,question\n007,{RGB},What?\n008,rgba.png,\n")
    got = items(csv)
    assert [(i.id, i.question) for i in got] == [("007", "What?"), ("008", None)]
    assert got[1].sources == (str(tmp_path / "rgba.png"),)
    with pytest.raises(UsageError, match=r"has no column 'img' .*its columns: id, image, question"):
        items(csv, columns="image=img")
    tsv = tmp_path / "t.tsv"
    tsv.write_text(f"key\timg\tphoto\n1\t{RGB}\t{RGBA}\n")
    with pytest.raises(UsageError, match=r"more than one column could be the image \(img, photo\)"):
        items(tsv)
    assert items(tsv, columns="image=photo")[0].sources == (str(RGBA),)
    # The real Parquet of apache/parquet-testing holds no media column.
    with pytest.raises(UsageError, match=r"has no image column .*its columns: id, bool_col"):
        items(FIXTURES / "alltypes_plain.parquet")


def test_a_datasets_folder_and_an_image_feature_are_read_without_naming_columns(
    tmp_path: Path,
) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {"picture": [str(RGB), str(RGBA)], "caption": ["x", "y"]}
    ).cast_column("picture", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    got = items(tmp_path / "saved", keep_columns="caption")
    assert [i.media_names for i in got] == [(RGB.name,), (RGBA.name,)]  # as datasets stored
    assert [i.sources[0][:5] for i in got] == ["data:", "data:"]  # the bytes datasets stored
    assert [i.meta for i in got] == [{"caption": "x"}, {"caption": "y"}]
    arrow = next((tmp_path / "saved").glob("*.arrow"))  # one of its files, alone
    assert [i.meta for i in items(arrow, keep_columns="caption")] == [
        {"caption": "x"},
        {"caption": "y"},
    ]
    datasets.DatasetDict({"train": ds, "test": ds.select([1])}).save_to_disk(str(tmp_path / "dd"))
    assert [i.id for i in items(tmp_path / "dd", split="test")] == ["0"]


def test_audio_arrays_with_their_rate_become_clips(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import soundfile

    samples = (np.sin(np.arange(8000) / 9) * 0.3).astype("float32")
    path = tmp_path / "a.parquet"
    pq.write_table(
        pa.table({"audio": [{"array": samples.tolist(), "sampling_rate": 8000}, str(MP3)]})
        if False
        else pa.table({"audio": [{"array": samples.tolist(), "sampling_rate": 8000}]}),
        path,
    )
    (item,) = items(path, AUDIO)
    data = base64.b64decode(item.sources[0].split(",", 1)[1])
    clip, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    assert rate == 8000 and np.allclose(clip, samples)


def test_a_cell_of_an_unknown_type_fails_its_row_alone(tmp_path: Path, fake_vllm: Any) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(f'id,image\ngood,{RGB}\nbad,"[1, 2]"\n')
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(csv), "-o", str(out))
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    by_id = {r["id"]: r for r in lines(out)}
    assert by_id["good"]["error"] is None
    assert "row 1 image[0] holds a int" in by_id["bad"]["error"]["message"]
    with pytest.raises(Exception, match="holds a float"):
        media_of(1.5, None, "row 0 image")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--columns", "image=bool_col"), "column 'bool_col' holds bool values, not media"),
        (("--columns", "photo=bool_col"), "invalid --columns entry 'photo=bool_col'"),
        (("--shard", "4/4"), "invalid --shard '4/4'"),
    ],
)
def test_bad_table_options_are_one_line(args: tuple[str, ...], message: str) -> None:
    result = cli("--input", str(FIXTURES / "alltypes_plain.parquet"), "--dry-run", *args)
    assert result.exit_code == EXIT_USAGE
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_corrupt_parquet_is_one_line() -> None:
    result = cli("--input", str(FIXTURES / "PARQUET-1481.parquet"), "--dry-run")
    assert result.exit_code == EXIT_USAGE
    assert "is not a readable Parquet file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_real_webdataset_shard_streams_samples_by_key() -> None:
    got = items(SHARD, keep_columns="cls")
    with tarfile.open(SHARD) as tar:
        keys = list(dict.fromkeys(m.name.split(".")[0] for m in tar.getmembers() if m.isfile()))
    assert [i.id for i in got] == keys  # every sample once, in the shard's order
    assert got[0].media_names == (f"{keys[0]}.png",) and got[0].meta is not None
    assert got[0].meta["cls"].isdigit()
    assert [i.id for i in items(SHARD, limit=3, shard="1/2")] == [keys[1], keys[3], keys[5]]


def test_a_tar_sample_without_its_media_fails_alone(tmp_path: Path, fake_vllm: Any) -> None:
    shard = tmp_path / "s.tar"
    with tarfile.open(shard, "w") as tar:
        for name, data in [("a.png", RGBA.read_bytes()), ("a.txt", b"Q?"), ("b.txt", b"no image")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(shard), "--columns", "question=txt", "-o", str(out))
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    by_id = {r["id"]: r for r in lines(out)}
    assert by_id["a"]["error"] is None and by_id["a"]["question"] == "Q?"
    assert "sample b has no .png member (its members: txt)" in by_id["b"]["error"]["message"]


def openai_batch(path: Path) -> Path:
    png = base64.b64encode(RGBA.read_bytes()).decode()
    requests = [
        {
            "custom_id": "r1",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is in this image?"},
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{png}"},
                            },
                        ],
                    }
                ],
            },
        },
        {
            "custom_id": "r2",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": RGB.name}},
                            {"type": "text", "text": "Describe it."},
                        ],
                    },
                ],
            },
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    (path.parent / RGB.name).write_bytes(RGB.read_bytes())
    return path


def test_an_openai_batch_runs_its_own_messages_and_answers_as_vllm_run_batch(
    tmp_path: Path, fake_vllm: Any
) -> None:
    batch = openai_batch(tmp_path / "batch.jsonl")
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(batch), "-o", str(out), "--output-format", "openai")
    assert result.exit_code == 0, out.read_text()[:3000]
    conversation = next(c for c in fake_vllm.submitted if c[0]["role"] == "system")
    assert conversation[0] == {"role": "system", "content": "Be brief."}
    assert [p["type"] for p in conversation[1]["content"]] == ["image_pil", "text"]
    rows = {r["custom_id"]: r for r in lines(out)}
    assert sorted(rows) == ["r1", "r2"]
    for row in rows.values():
        assert row["id"].startswith("vllm-") and row["error"] is None
        assert row["response"]["status_code"] == 200
        body = row["response"]["body"]
        assert body["object"] == "chat.completion" and body["choices"][0]["message"]["content"]
        assert body["usage"]["total_tokens"] == (
            body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
        )
    again = cli("--input", str(batch), "-o", str(out), "--output-format", "openai")
    assert again.exit_code == 0 and "0 done, 0 failed, 2 skipped" in again.stderr


def test_vllms_own_example_batch_fails_per_request_for_want_of_an_image(
    tmp_path: Path, fake_vllm: Any
) -> None:
    out = tmp_path / "out.jsonl"
    result = cli(
        "--input",
        str(FIXTURES / "openai_example_batch.jsonl"),
        "-o",
        str(out),
        "--output-format",
        "openai",
    )
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    rows = lines(out)
    assert sorted(r["custom_id"] for r in rows) == ["request-1", "request-2"]
    assert all(r["response"]["status_code"] == 400 and r["error"] for r in rows)


def test_a_hub_data_set_comes_from_a_populated_cache_offline(tmp_path: Path, table: Path) -> None:
    """The Hugging Face cache's layout built by hand (refs/main -> a snapshot), the CLI run in
    a process of its own with HF_HUB_OFFLINE=1, as a user runs it."""
    pytest.importorskip("datasets")
    import os
    import shutil
    import subprocess
    import sys

    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "datasets--acme--pictures"
    snapshot = repo / "snapshots" / revision
    (snapshot / "data").mkdir(parents=True)
    shutil.copy(table, snapshot / "data" / "train-00000-of-00001.parquet")
    shutil.copy(table, snapshot / "data" / "test-00000-of-00001.parquet")
    shutil.copy(RGB, snapshot / "data" / "rgb.jpg")  # row p's relative path
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mmrun", *MODEL, "--dry-run", "--json", "--quiet"]
        return subprocess.run(
            [*command, *args], capture_output=True, text=True, env=env, timeout=120
        )

    done = run(
        "--input", "hf://datasets/acme/pictures", "--split", "test", "--columns", "id=uid,image=img"
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == ["b", "l", "p", "s"]
    assert all(r["error"] is None for r in rows)
    named = run(
        "--input",
        "acme/pictures",
        "--input-format",
        "hf",
        "--split",
        "test",
        "--columns",
        "id=uid,image=img",
        "--limit",
        "1",
    )
    assert [json.loads(line)["id"] for line in named.stdout.splitlines()] == ["s"]
    missing = run(
        "--input", "hf://datasets/acme/pictures", "--split", "dev", "--columns", "image=img"
    )
    assert missing.returncode == EXIT_USAGE
    assert "has no split 'dev' (its splits: train, test)" in missing.stderr
    absent = run("--input", "hf://datasets/acme/other")
    assert absent.returncode == 1 and "acme/other is not in the Hugging Face cache" in absent.stderr
    assert len(absent.stderr.strip().splitlines()) == 1


def test_limit_and_shard_take_rows_by_their_place(table: Path) -> None:
    options = {"columns": "id=uid,image=img"}
    assert [i.id for i in items(table, limit=2, **options)] == ["s", "b"]
    shards = [[i.id for i in items(table, shard=f"{k}/3", **options)] for k in range(3)]
    assert shards == [["s", "l"], ["b"], ["p"]]
    reader = open_input(str(table), IMAGE, InputOptions(shard="0/3", **options))
    reader.check()
    assert reader.total == 2


def test_export_writes_a_table_from_the_ledger(tmp_path: Path, table: Path) -> None:
    result = cli(
        "--input",
        str(table),
        "--columns",
        "id=uid,image=img",
        "--keep-columns",
        "label",
        "-o",
        str(tmp_path / "r.jsonl"),
        "--dry-run",
    )
    assert result.exit_code == 0, result.stderr
    for name in ("r.parquet", "r.csv"):
        done = in_process(["export", str(tmp_path / "r.jsonl"), str(tmp_path / name)])
        assert done.exit_code == 0 and done.stderr.strip() == f"4 rows in {tmp_path / name}"
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    parquet = pq.read_table(tmp_path / "r.parquet")
    assert parquet.column_names[:3] == ["id", "index", "media"] and "label" in parquet.column_names
    assert sorted(parquet.column("label").to_pylist()) == [1, 1, 3, 4]
    csv = pacsv.read_csv(tmp_path / "r.csv")
    assert sorted(csv.column("id").to_pylist()) == ["b", "l", "p", "s"]
    bad = in_process(["export", str(tmp_path / "nothing.jsonl"), str(tmp_path / "x.parquet")])
    assert bad.exit_code == EXIT_USAGE and "no such results file" in bad.stderr


def test_export_keeps_a_structured_answer_as_json_text(tmp_path: Path) -> None:
    ledger = tmp_path / "r.jsonl"
    lines = [
        {"id": "a", "index": 0, "text": '{"n": 2}', "parsed": {"n": 2}, "error": None},
        {
            "id": "b",
            "index": 1,
            "text": "[1",
            "parsed": None,
            "error": {"stage": "output", "message": "the answer is not JSON"},
        },
    ]
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = in_process(["export", str(ledger), str(tmp_path / "r.parquet")])
    assert done.exit_code == 0, done.stderr
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert [json.loads(r["parsed"]) if r["parsed"] else None for r in rows] == [{"n": 2}, None]
    assert [r["error_stage"] for r in rows] == [None, "output"]


READ_ALL = """
import resource, sys
from mmrun.inputs import InputOptions, open_input
from mmrun.modalities.image import IMAGE
reader = open_input(sys.argv[1], IMAGE, InputOptions())
reader.check()
count = sum(1 for _ in reader)
print(count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_reading_a_table_takes_the_same_memory_for_twenty_times_the_rows(tmp_path: Path) -> None:
    """The reader alone (bench/cpu/tables.py measures whole dry runs up to 1,000,000 rows)."""
    import subprocess
    import sys

    from bench.cpu.tables import write_table

    peaks = []
    for rows in (10_000, 200_000):
        table = tmp_path / f"t{rows}.parquet"
        write_table(table, rows)
        done = subprocess.run(
            [sys.executable, "-c", READ_ALL, str(table)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        count, peak_kib = map(int, done.stdout.split())
        assert count == rows
        peaks.append(peak_kib / 1024)
    # MiB: flat. Held whole, 190,000 more rows take about 160 MiB more (+80 MiB for 90,000);
    # the streamed reader's peak moved by up to 20 MiB with the machine's load.
    assert peaks[1] < peaks[0] + 40, peaks


def test_ids_repeated_or_missing_in_a_table_are_one_line(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(f"id,image\na,{RGB}\nb,{RGB}\na,{RGBA}\n")
    with pytest.raises(UsageError, match=r"id 'a' \(column 'id'\) is on more than one row"):
        items(csv)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", None], "image": [str(RGB), str(RGBA)]}), tmp_path / "n.pq")
    with pytest.raises(UsageError, match=r"row 1: the id column 'id' is empty"):
        items(tmp_path / "n.pq")
