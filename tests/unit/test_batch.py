"""Batch runs above the engine, with the stand-in vLLM: streamed lines, one failed prompt
among good ones, exit codes, the summary, resuming, and the output file's safety rules.
The real engine runs the same paths in tests/e2e/test_batch_e2e.py."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import re
import time
import types
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_PARTIAL, EXIT_USAGE
from tests.helpers.cli import in_process
from tests.helpers.http import PNG

# mistral3 writes its own prompt: no processor to load, so the CLI runs offline.
MODEL = ("image", "-m", "mistral3")


def cli(*args: str) -> Any:
    return in_process([*MODEL, *args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(5):
        (folder / f"p{i}.png").write_bytes(PNG)
    return folder


def test_a_folder_streams_one_line_per_prompt_with_the_documented_fields(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    result = cli("-i", str(photos), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == sorted(str(p) for p in photos.iterdir())
    for row in rows:
        assert set(row) == {
            "id",
            "index",
            "media",
            "question",
            "text",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
            "parsed",
            "meta",
            "settings",
            "error",
            "finished_at",
        }
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row["finished_at"])
        assert row["error"] is None and row["text"].startswith("  answer")
        assert row["parsed"] is None and row["settings"] is None
        assert row["media"] == [row["id"]] and row["prompt_tokens"] == 11
    assert result.stdout == ""  # the results went to the file
    assert result.stderr.strip().endswith("5 done, 0 failed, 0 skipped in 0.0s") or (
        "5 done, 0 failed, 0 skipped" in result.stderr
    )
    sidecar = json.loads((tmp_path / "out.jsonl.mmrun.json").read_text())
    assert sidecar["schema"] == "mmrun.batch/2" and sidecar["run"]["key"] == "mistral3"


def test_bad_items_get_error_lines_and_the_others_succeed(
    fake_vllm: Any, photos: Path, tmp_path: Path, server: Any
) -> None:
    (photos / "broken.png").write_bytes(PNG[:40])
    manifest = tmp_path / "m.jsonl"
    rows = [
        {"id": "good", "image": ["photos/p0.png", "photos/p1.png"]},
        {"id": "missing", "image": server.url("/nothing.png")},
        {"id": "truncated", "image": "photos/broken.png"},
        {"id": "refused", "image": "photos/p2.png", "question": "REJECT this one"},
        {"id": "too-many", "image": [f"photos/p{i % 5}.png" for i in range(3)]},
        {"id": "also-good", "image": "photos/p3.png", "meta": {"row": 6}},
    ]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(manifest), "-o", str(out))
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    by_id = {r["id"]: r for r in lines(out)}
    assert sorted(by_id) == sorted(r["id"] for r in rows)
    assert by_id["good"]["error"] is None and by_id["also-good"]["meta"] == {"row": 6}
    assert by_id["missing"]["error"]["stage"] == "media"
    assert "HTTP 404" in by_id["missing"]["error"]["message"]
    assert by_id["truncated"]["error"]["stage"] == "media"
    assert by_id["refused"]["error"] == {
        "stage": "request",
        "message": "The decoder prompt (length 9999) is longer than the maximum model length",
    }
    # mistral3 takes any number of images, so "too-many" is fine here: vLLM's limit was
    # raised to the manifest's largest prompt.
    assert by_id["too-many"]["error"] is None
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("3 done, 3 failed, 0 skipped in ") and summary.endswith(
        f"; errors in {out}"
    ), summary


def test_a_prompt_with_more_items_than_the_model_takes_fails_alone(
    fake_vllm: Any, tmp_path: Path, media_dir: Path
) -> None:
    clip = str(media_dir / "tone.wav")
    manifest = tmp_path / "clips.jsonl"
    manifest.write_text(
        json.dumps({"id": "one", "audio": clip})
        + "\n"
        + json.dumps({"id": "two", "audio": [clip, clip]})
        + "\n"
    )
    result = in_process(["audio", "-m", "whisper", "--input", str(manifest), "--json", "--quiet"])
    assert result.exit_code == EXIT_PARTIAL
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["one"]["error"] is None
    assert rows["two"]["error"] == {
        "stage": "request",
        "message": "whisper takes at most 1 audio(s) per prompt, got 2",
    }
    # vLLM is told the model's own limit, not the manifest's largest prompt.
    assert fake_vllm.submitted and all(
        len(r["multi_modal_data"]["audio"]) == 1 for r in fake_vllm.submitted
    )


def test_resume_skips_what_is_done_and_retry_errors_redoes_failures_once(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    (photos / "broken.png").write_bytes(PNG[:40])
    out = tmp_path / "out.jsonl"
    first = cli("-i", str(photos), "-o", str(out))
    assert first.exit_code == EXIT_PARTIAL
    submitted = len(fake_vllm.submitted)
    assert submitted == 5
    again = cli("-i", str(photos), "-o", str(out))
    assert again.exit_code == EXIT_PARTIAL  # the failed prompt is still failed
    assert len(fake_vllm.submitted) == submitted  # nothing ran again
    assert "0 done, 0 failed, 6 skipped" in again.stderr
    assert "1 failed in an earlier run (--retry-errors runs them again)" in again.stderr
    (photos / "broken.png").write_bytes(PNG)  # fixed
    retry = cli("-i", str(photos), "-o", str(out), "--retry-errors")
    assert retry.exit_code == 0, retry.stderr
    assert len(fake_vllm.submitted) == submitted + 1
    ids = [r["id"] for r in lines(out)]
    assert len(ids) == len(set(ids)) == 6  # every id exactly once
    assert all(r["error"] is None for r in lines(out))


def test_a_different_run_is_refused_unless_overwrite(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli("-i", str(photos), "-o", str(out)).exit_code == 0
    before = out.read_bytes()
    other = cli("-i", str(photos), "-o", str(out), "--temperature", "0.5")
    assert other.exit_code == EXIT_USAGE
    assert other.stderr.count("\n") == 1
    assert "was written by a different run (sampling differs)" in other.stderr
    assert out.read_bytes() == before  # untouched
    fresh = cli("-i", str(photos), "-o", str(out), "--temperature", "0.5", "--overwrite")
    assert fresh.exit_code == 0
    assert len(lines(out)) == 5


def test_a_torn_last_line_is_cut_off_and_its_prompt_run_again(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli("-i", str(photos), "-o", str(out)).exit_code == 0
    rows = out.read_text().splitlines(keepends=True)
    torn = json.loads(rows[-1])["id"]
    out.write_text("".join(rows[:-1]) + rows[-1][: len(rows[-1]) // 2])  # killed mid-write
    again = cli("-i", str(photos), "-o", str(out))
    assert again.exit_code == 0, again.stderr
    assert "1 done, 0 failed, 4 skipped" in again.stderr
    final = lines(out)
    assert sorted(r["id"] for r in final) == sorted(str(p) for p in photos.iterdir())
    assert [r["id"] for r in final].count(torn) == 1


def test_a_file_without_its_record_is_not_appended_to(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "someone else\'s"}\n')
    result = cli("-i", str(photos), "-o", str(out))
    assert result.exit_code == EXIT_USAGE
    assert "already holds results, but not what produced them" in result.stderr
    assert out.read_text() == '{"id": "someone else\'s"}\n'


def test_a_second_writer_of_the_same_file_is_refused(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    import fcntl

    out = tmp_path / "out.jsonl"
    out.touch()
    with open(out) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = cli("-i", str(photos), "-o", str(out))
    assert result.exit_code == EXIT_USAGE
    assert f"another mmrun is writing {out}" in result.stderr


def test_fail_fast_stops_at_the_first_failure(fake_vllm: Any, photos: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"id": str(i), "image": "photos/p0.png", "question": q}) + "\n"
            for i, q in enumerate(["fine", "REJECT", "fine", "fine"])
        )
    )
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(manifest), "-o", str(out), "--fail-fast")
    assert result.exit_code == EXIT_PARTIAL
    rows = lines(out)
    assert [r["id"] for r in rows if r["error"]] == ["1"]
    assert "2" not in {r["id"] for r in rows} and "3" not in {r["id"] for r in rows}


def seeds_by_question(fake_vllm: Any) -> dict[str, Any]:
    """The sampling seed each submitted prompt carried, by the question in its prompt."""
    from tests.helpers.fake_vllm.vllm import _describe

    found = {}
    for request, params in zip(fake_vllm.submitted, fake_vllm.sampled, strict=True):
        question = _describe(request)[0].split("ask-")[1].split()[0]
        found[question] = params.kwargs.get("seed")
    return found


def test_each_prompt_samples_with_its_own_seed_whatever_its_place(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    """A sampled text must not depend on which prompts ran beside it: each prompt's seed comes
    from the run's seed and the prompt's id, not from its place or its batch."""
    ids = ["a", "b", "c", "d"]

    def run(order: list[str], *flags: str) -> dict[str, Any]:
        manifest = tmp_path / "m.jsonl"
        manifest.write_text(
            "".join(
                json.dumps({"id": i, "image": "photos/p0.png", "question": f"ask-{i}"}) + "\n"
                for i in order
            )
        )
        fake_vllm.submitted.clear()
        fake_vllm.sampled.clear()
        out = tmp_path / "out.jsonl"
        result = cli("--input", str(manifest), "-o", str(out), "--overwrite", *flags)
        assert result.exit_code == 0, result.stderr
        return seeds_by_question(fake_vllm)

    sampled = ("--temperature", "0.8", "--seed", "5")
    first = run(ids, *sampled)
    assert sorted(first) == ids
    assert len(set(first.values())) == 4 and all(isinstance(v, int) for v in first.values())
    assert run(ids[::-1], *sampled) == first  # the same seeds, in another order
    assert run(ids[2:], *sampled) == {i: first[i] for i in ids[2:]}  # and with fewer beside
    other = run(ids, "--temperature", "0.8", "--seed", "6")
    assert not set(other.values()) & set(first.values())  # another run seed, other seeds
    # Greedy: nothing to seed. A seed the user names for sampling is every prompt's.
    assert set(run(ids, "--temperature", "0", "--seed", "5").values()) == {None}
    named = run(ids, *sampled, "--sampling-arg", "seed=9")
    assert set(named.values()) == {9}


@pytest.mark.alone
def test_the_first_prompt_is_built_while_the_engine_starts(
    fake_vllm: Any, photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's first build loads its processor or tokenizer: done during the engine's
    start (seconds on a GPU), once vLLM's engine core process exists (vLLM's frontend has
    done its imports by then), not after the engine is ready."""
    from mmrun.builder import RequestBuilder

    events: list[str] = []
    build, construct = RequestBuilder.prompt, fake_vllm.__init__

    def recorded_build(self: Any, *args: Any) -> Any:
        events.append("build")
        return build(self, *args)

    def start_with_an_engine_core(self: Any, **engine_args: Any) -> None:
        time.sleep(0.3)  # the frontend's own work: nothing is built meanwhile
        core = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(3,))
        events.append("core")  # before it exists: a build can only come after
        core.start()
        time.sleep(1.5)  # the engine core starting
        construct(self, **engine_args)
        events.append("ready")
        core.kill()
        core.join()

    monkeypatch.setattr(RequestBuilder, "prompt", recorded_build)
    monkeypatch.setattr(fake_vllm, "__init__", start_with_an_engine_core)
    result = cli("-i", str(photos), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.stderr
    assert events[:3] == ["core", "build", "ready"], events
    assert len(lines(tmp_path / "out.jsonl")) == 5


def test_json_without_output_streams_lines_to_stdout(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    result = cli("-i", str(photos), "--json", "--quiet")
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 5 and all(r["error"] is None for r in rows)
    assert result.stderr == ""  # --quiet: not even the summary


def test_method_chat_in_a_batch_sends_conversations(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    result = cli("-i", str(photos), "--json", "--method", "chat", "-q", "Which animal?")
    assert result.exit_code == 0, result.stderr
    conversation = fake_vllm.submitted[0]
    parts = conversation[0]["content"]
    assert parts[0] == {"type": "text", "text": "Which animal?"}
    assert [p["type"] for p in parts[1:]] == ["image_pil"]


def test_a_batch_dry_run_writes_the_prompts_without_an_engine(photos: Path, tmp_path: Path) -> None:
    out = tmp_path / "dry.jsonl"
    result = cli("-i", str(photos), "-o", str(out), "--dry-run")
    assert result.exit_code == 0, result.stderr
    rows = lines(out)
    assert len(rows) == 5
    assert all(
        r["prompt"] == "<s>[INST]What is the content of each image?\n[IMG][/INST]" for r in rows
    )
    assert all(r["text"] is None and r["error"] is None for r in rows)


def test_plain_progress_lines_off_a_terminal(
    fake_vllm: Any, photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mmrun.cli import _output

    real = _output.BatchProgress.__init__

    def every_line(self: Any, console: Any, total: int, every_s: float = 10.0) -> None:
        real(self, console, total, every_s=0.0)

    monkeypatch.setattr(_output.BatchProgress, "__init__", every_line)
    result = cli("-i", str(photos), "-o", str(tmp_path / "out.jsonl"))
    progress = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("mmrun: ") and "prompts," in line
    ]
    assert progress
    assert all(re.match(r"mmrun: [0-5]/5 prompts, 0 failed, ", line) for line in progress)
    assert os.environ.get("NO_COLOR") is None or "\x1b" not in result.stderr


def slow_first_manifest(tmp_path: Path, server: Any, slow: Any) -> tuple[Path, list[str]]:
    """A manifest whose first prompt's picture comes from ``slow`` (a route of ``server``),
    then four local photos: its path and the ids in input order."""
    server.routes["/slow.png"] = slow
    rows = [{"id": "slow", "image": server.url("/slow.png")}]
    rows += [{"id": f"fast{i}", "image": f"photos/p{i}.png"} for i in range(4)]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest, [r["id"] for r in rows]


def test_a_slow_download_does_not_hold_up_the_prompts_behind_it(
    fake_vllm: Any, photos: Path, tmp_path: Path, server: Any
) -> None:
    from tests.helpers.http import reply

    out = tmp_path / "out.jsonl"

    def slow(handler: Any) -> None:
        # Answers once the other four lines are written (or after 30 s, when they wait for it)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and out.read_text().count("\n") >= 4:
                break
            server.stall(0.05)
        reply(handler, 200, PNG)

    manifest, _ = slow_first_manifest(tmp_path, server, slow)
    result = cli("--input", str(manifest), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert [r["id"] for r in lines(out)][-1] == "slow"  # the others were answered meanwhile


def test_a_dry_run_writes_its_lines_in_input_order_behind_a_slow_download(
    photos: Path, tmp_path: Path, server: Any
) -> None:
    from tests.helpers.http import reply

    def slow(handler: Any) -> None:
        server.stall(1.0)
        reply(handler, 200, PNG)

    manifest, ids = slow_first_manifest(tmp_path, server, slow)
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(manifest), "-o", str(out), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert [r["id"] for r in lines(out)] == ids


def test_results_are_written_while_the_window_fills(
    fake_vllm: Any, photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its engine core in processes of its own, vLLM's results wait in a queue; once one
    is there, mmrun writes it before preparing more requests, instead of submitting the whole
    window (2 x max_num_seqs: 512 by default on a GPU) first."""
    engine_class = type(fake_vllm().llm_engine)
    real_init, real_step = engine_class.__init__, engine_class.step
    submitted_at_first_result: list[int] = []

    def init(self: Any, llm: Any) -> None:
        real_init(self, llm)
        waiting = types.SimpleNamespace(empty=lambda: not llm.queue)  # the output queue
        self.engine_core.outputs_queue = waiting

    def step(self: Any) -> list[Any]:
        done = real_step(self)
        if done and not submitted_at_first_result:
            submitted_at_first_result.append(len(fake_vllm.submitted))
        return done

    monkeypatch.setattr(engine_class, "__init__", init)
    monkeypatch.setattr(engine_class, "step", step)
    manifest = tmp_path / "m.jsonl"
    rows = [{"id": f"q{i}", "image": f"photos/p{i % 5}.png"} for i in range(40)]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    fake_vllm.submitted.clear()
    result = cli("--input", str(manifest), "-o", str(out), "--engine-arg", "max_num_seqs=16")
    assert result.exit_code == 0, result.stderr
    assert sorted(r["id"] for r in lines(out)) == sorted(r["id"] for r in rows)
    assert submitted_at_first_result and submitted_at_first_result[0] < 32, (
        submitted_at_first_result
    )


def fills_recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """After every fill of a batch's media pipeline: (items handed out, items waiting)."""
    from mmrun import runner as runner_module

    waiting: list[tuple[int, int]] = []
    real_fill = runner_module.MediaPipeline.fill

    def fill(self: Any) -> None:
        real_fill(self)
        waiting.append((self._seen_items, len(self._queue)))

    monkeypatch.setattr(runner_module.MediaPipeline, "fill", fill)
    return waiting


def test_large_decoded_media_shorten_the_lookahead(
    fake_vllm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The media resolved ahead of the engine stay within MMRUN_PREFETCH_MB: with a window of
    512 prompts (max_num_seqs 256, so 1,024 ahead), at most 32 are resolved before any size
    is known, then as many as the budget holds (8 MB of 3 MB images: 2)."""
    from PIL import Image

    folder = tmp_path / "big"
    folder.mkdir()
    for i in range(40):
        Image.new("RGB", (1024 + i, 1024), (i, 0, 0)).save(folder / f"b{i:02d}.png")
    waiting = fills_recorded(monkeypatch)
    monkeypatch.setenv("MMRUN_PREFETCH_MB", "8")
    out = tmp_path / "out.jsonl"
    result = cli("-i", str(folder), "-o", str(out), "--engine-arg", "max_num_seqs=256")
    assert result.exit_code == 0, result.stderr
    assert len(lines(out)) == 40
    assert max(queued for _, queued in waiting) <= 32, waiting  # not all 40
    sized = [queued for seen, queued in waiting if seen >= 1]
    # Once sizes are known, no fill adds items beyond the budget's 2.
    assert all(b <= max(a, 2) for a, b in itertools.pairwise(sized)), sized


@pytest.mark.parametrize("per_prompt", [1, 2])
def test_once_sizes_are_known_a_batch_resolves_only_enough_to_keep_the_threads_busy(
    fake_vllm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_prompt: int
) -> None:
    """Small media, far within MMRUN_PREFETCH_MB, and a window of 1,024 prompts ahead: at most
    32 prompts are resolved before any size is known (the engine's start), then no more than
    keep the 12 resolver threads busy (12 images: 12 prompts of one, 6 of two)."""
    from PIL import Image

    from mmrun.media.download import DOWNLOAD_WORKERS

    folder = tmp_path / "small"
    folder.mkdir()
    rows = []
    for i in range(60):
        names = []
        for j in range(per_prompt):
            name = f"s{i:02d}-{j}.png"
            Image.new("RGB", (16, 16), (i, j, 0)).save(folder / name)
            names.append(str(folder / name))
        rows.append({"id": f"q{i}", "image": names if per_prompt > 1 else names[0]})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    waiting = fills_recorded(monkeypatch)
    out = tmp_path / "out.jsonl"
    result = cli("--input", str(manifest), "-o", str(out), "--engine-arg", "max_num_seqs=512")
    assert result.exit_code == 0, result.stderr
    assert sorted(r["id"] for r in lines(out)) == sorted(r["id"] for r in rows)
    assert max(queued for _, queued in waiting) <= 32, waiting
    paced = DOWNLOAD_WORKERS // per_prompt
    sized = [queued for seen, queued in waiting if seen >= 1]
    # Handed out one by one, the first 32 drain; after that a fill tops up to ``paced``.
    assert any(queued == paced for queued in sized), sized
    assert all(b <= max(a, paced) for a, b in itertools.pairwise(sized)), sized


def test_a_bad_prefetch_budget_is_a_usage_error(
    fake_vllm: Any, photos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MMRUN_PREFETCH_MB", "lots")
    result = cli("-i", str(photos), "-o", "/dev/null")
    assert result.exit_code == EXIT_USAGE
    assert "MMRUN_PREFETCH_MB='lots' is not a positive number of megabytes" in result.stderr


def test_output_to_a_device_streams_without_a_lock_or_a_record_beside_it(
    fake_vllm: Any, photos: Path
) -> None:
    # Another process holding /dev/null's lock (a second mmrun writing there) must not make
    # this run refuse, and nothing may be written into /dev beside it.
    import fcntl

    record = Path(os.devnull + ".mmrun.json")
    record.unlink(missing_ok=True)
    with open(os.devnull, "rb") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = cli("-i", str(photos), "-o", os.devnull)
    assert result.exit_code == 0, result.stderr
    assert not record.exists()


def test_an_image_goes_with_every_clip_and_a_resume_must_name_the_same(
    fake_vllm: Any, tmp_path: Path
) -> None:
    """``mmrun video --image``: every request carries the image and its clip, the output's
    record names the image, and a run with another image is refused, not mixed in."""
    from tests.helpers.media import write_clip

    clips = tmp_path / "clips"
    clips.mkdir()
    for name in ("a.mp4", "b.mp4"):
        write_clip(clips / name)
    first, second = tmp_path / "first.png", tmp_path / "second.png"
    first.write_bytes(PNG)
    second.write_bytes(PNG)
    out = tmp_path / "out.jsonl"
    # llava-onevision's prompt is written by hand: no processor to load offline.
    args = ["video", "-m", "llava-onevision", "--video", str(clips), "-o", str(out)]
    done = in_process([*args, "--image", str(first)])
    assert done.exit_code == 0, done.stderr
    assert len(fake_vllm.submitted) == 2
    for request in fake_vllm.submitted:
        assert {k: len(v) for k, v in request["multi_modal_data"].items()} == {
            "image": 1,
            "video": 1,
        }
        assert request["prompt"].count("<image>") == request["prompt"].count("<video>") == 1
    record = json.loads(out.with_name(out.name + ".mmrun.json").read_text())["run"]
    assert record["with_media"] == {"image": [str(first)]}
    before = out.read_bytes()
    other = in_process([*args, "--image", str(second)])
    assert other.exit_code == EXIT_USAGE
    assert "was written by a different run (with_media differs)" in other.stderr
    assert out.read_bytes() == before
