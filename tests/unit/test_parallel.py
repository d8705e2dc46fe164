"""Several engines on one host (-dp N), above the engine: the device layout, and the
coordinator with replicas running the stand-in vLLM (tests/helpers/fake_vllm) in real
processes. The real engines run in tests/e2e/test_scale_out_e2e.py."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mmrun.devices import Replica, layout
from mmrun.errors import UsageError
from tests.helpers.http import PNG


def test_gpus_are_split_in_tensor_parallel_groups() -> None:
    replicas = layout(2, 2, "gpu", ["0", "1", "2", "3"])
    assert [r.gpus for r in replicas] == [("0", "1"), ("2", "3")]
    assert replicas[1].describe() == "GPU 2,3"


def test_too_few_gpus_is_a_usage_error_naming_the_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    with pytest.raises(UsageError) as caught:
        layout(2, 2, "gpu", ["0", "1", "2"])
    assert str(caught.value) == (
        "-dp 2 with 2 GPU(s) each needs 4 GPUs; 3 are visible (CUDA_VISIBLE_DEVICES=0,1,2) "
        "(lower -dp or -tp, or make more GPUs visible)"
    )


def test_cpu_replicas_split_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert [r.cpus for r in layout(2, 1, "cpu", [])] == [(0, 1), (2, 3)]
    assert [r.cpus for r in layout(8, 1, "cpu", [])] == [()] * 8  # more engines than cores: shared
    assert Replica(0).describe() == "shared"


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(24):
        (folder / f"p{i:02d}.png").write_bytes(PNG)
    return folder


def mmrun(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mmrun", "image", "-m", "mistral3", *args],
        capture_output=True,
        text=True,
        env={**env, "HF_HUB_OFFLINE": "1", "MMRUN_PLUGINS": ""},
        timeout=300,
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin two replicas")
def test_two_replicas_share_one_queue_and_one_writer(
    photos: Path, tmp_path: Path, fake_vllm_env: dict[str, str]
) -> None:
    out = tmp_path / "out.jsonl"
    (tmp_path / "gate").mkdir()
    gate = f"{tmp_path / 'gate'}:2"  # both replicas ready together
    env = {**fake_vllm_env, "FAKE_VLLM_STEP_S": "0.5", "FAKE_VLLM_START_GATE": gate}
    proc = mmrun(["-i", str(photos), "-o", str(out), "-dp", "2", "--max-tokens", "2"], env)
    assert proc.returncode == 0, proc.stderr
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == sorted(str(p) for p in photos.iterdir())
    by_replica = collections.Counter(r["replica"] for r in rows)
    assert set(by_replica) == {0, 1}, by_replica
    assert "engines: 2 (local) on CPU 0 | CPU 1" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("24 done, 0 failed, 0 skipped")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin two replicas")
@pytest.mark.parametrize("restarts", ["3", "0"])
def test_a_replica_whose_engine_dies_restarts_it_or_hands_its_prompts_to_the_other(
    restarts: str, photos: Path, tmp_path: Path, fake_vllm_env: dict[str, str]
) -> None:
    """Replica 0's engines die at their third step. By default the replica starts its engine
    again and goes on; with --max-restarts 0 it stops and the other takes its prompts."""
    out = tmp_path / "out.jsonl"
    (tmp_path / "gate").mkdir()
    env = {
        **fake_vllm_env,
        "FAKE_VLLM_STEP_S": "0.5",
        "FAKE_VLLM_DIE_ON_CPU": "0",
        "FAKE_VLLM_START_GATE": f"{tmp_path / 'gate'}:2",
    }
    proc = mmrun(["-i", str(photos), "-o", str(out), "-dp", "2", "--max-restarts", restarts], env)
    assert proc.returncode == 0, proc.stderr
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == sorted(str(p) for p in photos.iterdir())
    assert len(rows) == 24 and all(r["error"] is None for r in rows)
    assert {r["replica"] for r in rows} == {0, 1}  # replica 0 answered some before it died
    if restarts == "0":
        assert (
            "mmrun: replica 0 (CPU 0) stopped: the engine core stopped without logging a reason"
            in proc.stderr
        )
        assert "unfinished prompt(s) go back to the queue\n" in proc.stderr
    else:
        assert (
            "mmrun: replica 0: the engine died (the engine core stopped without logging a "
            "reason); " in proc.stderr
        )
        assert "mmrun: replica 0 (CPU 0) stopped" not in proc.stderr
        assert "the engine was started again" in proc.stderr.strip().splitlines()[-1]


def test_when_every_replica_dies_the_run_fails_and_can_resume(
    photos: Path, tmp_path: Path, fake_vllm_env: dict[str, str]
) -> None:
    out = tmp_path / "out.jsonl"
    env = {**fake_vllm_env, "FAKE_VLLM_FAIL_STEP": "EngineDeadError: the engine died"}
    proc = mmrun(["-i", str(photos), "-o", str(out), "-dp", "2", "--max-restarts", "1"], env)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("mmrun: error: every replica stopped before the batch was done"), last
    assert "run the same command again to resume" in last
    again = mmrun(["-i", str(photos), "-o", str(out), "-dp", "2"], fake_vllm_env)
    assert again.returncode == 0, again.stderr
    assert len(lines(out)) == 24


@pytest.mark.parametrize("flags", [["-dp", "2"], ["--backend", "ray"]])
def test_a_dry_run_starts_no_engine_and_names_the_plan(
    flags: list[str], photos: Path, tmp_path: Path, fake_vllm_env: dict[str, str]
) -> None:
    """A dry run of a batch for several engines prepares every prompt here and starts
    nothing: no replica, no Ray cluster (it once started both)."""
    out = tmp_path / "out.jsonl"
    env = {**fake_vllm_env, "FAKE_VLLM_FAIL_START": "a dry run must not start an engine"}
    proc = mmrun(["-i", str(photos), "-o", str(out), "--dry-run", *flags], env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["id"] for r in lines(out)) == sorted(str(p) for p in photos.iterdir())
    backend = "ray" if "ray" in flags else "local"
    assert f"mmrun: engines: {2 if backend == 'local' else 1} ({backend})" in proc.stderr


def test_a_replica_gone_before_the_answer_to_its_request_loses_nothing(
    photos: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica that asks for prompts and dies before the coordinator answers: the answer
    fails with a broken pipe (in CI this surfaced as "unexpected BrokenPipeError" and ended
    the run). The prompts go back to the queue and the other replica answers every one."""
    from mmrun.backends import replicas as coordinator
    from mmrun.inputs import Item
    from mmrun.outcome import Hooks
    from mmrun.plan import Engines
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info
    from tests.helpers import replicas

    monkeypatch.setattr(coordinator, "replica_main", replicas.first_dies_after_asking)
    files = sorted(str(p) for p in photos.iterdir())
    opts = RunOptions(modality="image", key="qwen2_5_vl", model="x", sources=tuple(files))
    the_plan = dataclasses.replace(
        plan(opts, get_registry(), vllm_info()), engines=Engines(layout=(Replica(0), Replica(1)))
    )
    items = iter([Item(id=f, index=i, sources=(f,)) for i, f in enumerate(files)])
    outcomes: list[Any] = []
    lost: list[str] = []
    hooks = Hooks(on_notice=lambda text, warning: lost.append(text) if warning else None)
    stats = coordinator.Replicas(the_plan, quiet=True).run(items, outcomes.append, hooks)
    assert sorted(o.item.id for o in outcomes) == files  # each exactly once
    assert {o.replica for o in outcomes} == {1}
    assert all(o.completion.text == f"answer to {o.item.id}" for o in outcomes)
    assert stats.done == len(files) and stats.failed == 0
    # Started again up to --max-restarts (3) times, dying the same way each time.
    assert len(lost) == 4, lost
    assert all(
        text.startswith("mmrun: replica 0 (shared) stopped: its connection to mmrun broke")
        for text in lost
    ), lost
    assert [text.endswith(f"(restart {n} of 3)") for n, text in enumerate(lost, 1)] == [
        True,
        True,
        True,
        False,
    ], lost


def test_replicas_run_each_openai_line_with_its_own_messages_and_settings(
    photos: Path, tmp_path: Path, fake_vllm_env: dict[str, str]
) -> None:
    """-dp N: each line's own messages, completion prompt and settings reach the replica's
    engine (the stand-in vLLM answers a chat from the last user turn's first text part and a
    JSON-schema request within its schema), and the counts vLLM gives come back."""
    from tests.unit.test_openai_batch import COMPLETIONS_URL, JSON_SCHEMA, image_chat, line

    photo = str(sorted(photos.iterdir())[0])
    two_parts = image_chat("Describe it.", photo)
    two_parts["messages"][0]["content"].insert(1, {"type": "text", "text": "In one line."})
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        line("a", two_parts)
        + line("b", image_chat("Which colour?", photo, response_format=JSON_SCHEMA))
        + line("c", {"model": "m", "prompt": "Once upon a time", "max_tokens": 7}, COMPLETIONS_URL)
    )
    out = tmp_path / "out.jsonl"
    args = ["--input", str(batch), "-o", str(out), "--output-format", "openai", "-dp", "2"]
    proc = mmrun(args, fake_vllm_env)
    assert proc.returncode == 0, proc.stderr
    bodies = {r["custom_id"]: r["response"]["body"] for r in lines(out)}
    assert bodies["a"]["choices"][0]["message"]["content"] == "  answer to 'Describe it.'\n"
    assert bodies["b"]["choices"][0]["message"]["content"] == '{"colour": "x"}'
    assert bodies["c"]["object"] == "text_completion"
    assert bodies["c"]["choices"][0]["text"] == "  answer to 'Once upon a time'\n"
    assert bodies["a"]["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 0,
        "created_cache_tokens": 8,
        "multimodal_tokens": None,
    }
