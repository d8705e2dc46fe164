"""The CLI worker of the end-to-end tests (tests/e2e/cli_worker.py), on the stand-in vLLM
(tests/helpers/fake_vllm): fast, so it runs with the unit tests. What it must do for the
end-to-end proofs to mean what they say: run mmrun's real CLI (its exit codes, its stdout and
stderr), reuse an engine only for a run that would start the very same one, and not carry a
failed start over to the next run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
from tests.helpers.stand_in import FAKE_VLLM


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> TinyCheckpoint:
    from tests.tiny import builders

    return builders()[("image", "llava")](tmp_path_factory.mktemp("llava"))


@pytest.fixture
def worker() -> Iterator[CliWorker]:
    worker = CliWorker(path=[str(FAKE_VLLM)])
    yield worker
    worker.close()


def args(llava: TinyCheckpoint, media_dir: Path, *extra: str) -> list[str]:
    image = str(media_dir / "blue.png")
    return ["image", "-m", "llava", "--model", str(llava.path), "-i", image, "--json", *extra]


def test_runs_the_cli_and_reuses_only_the_same_engine(
    worker: CliWorker, llava: TinyCheckpoint, media_dir: Path
) -> None:
    first = worker.run(args(llava, media_dir))
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)  # stdout holds the --json document alone
    assert doc["method"] == "generate" and len(doc["outputs"]) == 1
    assert not first.reused and first.engine_start_s is not None

    chat = worker.run(args(llava, media_dir, "--method", "chat"))
    assert chat.returncode == 0, chat.stderr
    assert json.loads(chat.stdout)["method"] == "chat"
    assert chat.reused and chat.engine_start_s is None  # the engine generate started

    other = worker.run(args(llava, media_dir, "--engine-arg", "max_num_seqs=1"))
    assert other.returncode == 0, other.stderr
    assert not other.reused and other.engine_start_s is not None  # other arguments, new engine

    worker.release()
    again = worker.run(args(llava, media_dir, "--engine-arg", "max_num_seqs=1"))
    assert not again.reused and again.engine_start_s is not None
    assert worker.starts == 1  # one process for all of it


def test_errors_keep_their_exit_code_and_line(
    worker: CliWorker, llava: TinyCheckpoint, media_dir: Path
) -> None:
    usage = worker.run(args(llava, media_dir, "-n", "3"))
    assert usage.returncode == 2 and usage.stdout == ""
    assert usage.stderr.startswith("mmrun: error: -n 3 does not match the 1 image sources")
    assert usage.stderr.count("\n") == 1
    assert worker.starts == 1  # nothing started: the process is kept


def test_a_failed_start_is_not_carried_to_the_next_run(
    worker: CliWorker, llava: TinyCheckpoint, media_dir: Path
) -> None:
    failed = worker.run(args(llava, media_dir), {"FAKE_VLLM_FAIL_START": "no room for the model"})
    assert failed.returncode == 2 and failed.stdout == ""  # vLLM refused its arguments
    (error,) = [line for line in failed.stderr.splitlines() if line.startswith("mmrun: error:")]
    assert "no room for the model" in error
    ok = worker.run(args(llava, media_dir))
    assert ok.returncode == 0, ok.stderr
    assert worker.starts == 2  # the next run had a process of its own
