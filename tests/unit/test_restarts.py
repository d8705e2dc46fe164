"""When a batch's engine dies: the restart policy on its own, then whole batches on the
stand-in vLLM (engines that die at given steps, a prompt that kills its engine every time,
--max-restarts 0), and an output file whose disk fills up. The real engine, killed for real,
is in tests/e2e/test_faults_e2e.py."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_FAILURE, EXIT_PARTIAL, EngineDied, EngineError
from mmrun.item import Item
from mmrun.prefetch import Ready
from mmrun.restarts import EngineLost, Restarts
from tests.helpers.cli import in_process
from tests.helpers.http import PNG


def ready(*ids: str) -> list[Ready]:
    return [Ready(Item(i, n, (f"{i}.png",)), [], None) for n, i in enumerate(ids)]


def lost(*ids: str) -> EngineLost:
    return EngineLost(EngineDied("the engine core process was killed by SIGKILL"), ready(*ids))


# --- the policy ----------------------------------------------------------------------------


def test_the_prompts_in_a_dead_engine_go_back_and_a_result_resets_the_count() -> None:
    restarts = Restarts(limit=2)
    first = restarts.died(lost("a", "b"))
    assert [r.item.id for r in first.requeue] == ["a", "b"] and not first.convicted
    assert first.restart == 1 and first.backoff_s == 1.0
    restarts.progressed()
    second = restarts.died(lost("c"))
    assert second.restart == 1  # a result came in between: a new count
    assert restarts.total == 2


def test_a_prompt_in_flight_at_two_deaths_runs_alone_and_two_deaths_alone_convict_it() -> None:
    restarts = Restarts(limit=3)
    restarts.died(lost("a", "b", "poison"))
    second = restarts.died(lost("poison", "c", "b"))
    assert restarts.alone("poison") and restarts.alone("b") and not restarts.alone("c")
    # the suspects go back first, in the order they were in the engine
    assert [r.item.id for r in second.requeue] == ["poison", "b", "c"]
    restarts.progressed()  # b answered alone
    once = restarts.died(lost("poison"))
    assert not once.convicted and [r.item.id for r in once.requeue] == ["poison"]
    twice = restarts.died(lost("poison"))
    assert [r.item.id for r in twice.convicted] == ["poison"] and twice.requeue == []
    assert twice.restart == 0 and not restarts.alone("poison")
    assert restarts.total == 4


def test_an_engine_that_dies_at_every_start_is_given_up_after_the_limit() -> None:
    restarts = Restarts(limit=2)
    restarts.died(lost("a"))
    restarts.died(lost("a"))  # a's second death alone: a is convicted, not counted
    restarts.died(lost("b"))
    with pytest.raises(EngineError) as raised:
        restarts.died(lost("c"))
    assert "the engine died 3 times in a row without finishing a prompt" in str(raised.value)
    assert "--max-restarts 2" in str(raised.value)


def test_no_restarts_gives_the_engine_s_own_error() -> None:
    error = lost("a")
    with pytest.raises(EngineDied) as raised:
        Restarts(limit=0).died(error)
    assert raised.value is error.error


def test_the_back_off_doubles_while_no_prompt_finishes() -> None:
    restarts = Restarts(limit=9)
    waits = [restarts.died(lost(f"p{i}")).backoff_s for i in range(7)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


# --- whole batches on the stand-in engine --------------------------------------------------


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmrun import restarts

    monkeypatch.setattr(restarts, "BACKOFF_S", 0.0)


def manifest(tmp_path: Path, count: int, poison: int | None = None) -> Path:
    (tmp_path / "p.png").write_bytes(PNG)
    rows = [
        {"id": f"q{i}", "image": "p.png", "question": "POISON" if i == poison else f"Q{i}"}
        for i in range(count)
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run(*args: str) -> Any:
    return in_process(["image", "-m", "mistral3", *args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_batch_whose_engine_dies_three_times_finishes_with_every_id_once(
    fake_vllm: Any, no_backoff: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.die_at = {2, 6, 11}
    out = tmp_path / "out.jsonl"
    result = run("--input", str(manifest(tmp_path, 30)), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == sorted(f"q{i}" for i in range(30))
    assert all(r["error"] is None for r in rows)
    # The notices reach the terminal's stderr while the engine's output goes to its log.
    notices = capfd.readouterr().err
    died = [line for line in notices.splitlines() if line.startswith("mmrun: the engine died")]
    assert len(died) == 3, notices
    assert died[0].startswith(
        "mmrun: the engine died (the engine core stopped without logging a reason); "
    )
    assert (
        "prompt(s) back in the queue; starting it again in 0s (restart 1 of at most 3" in (died[0])
    )
    assert "; its log: " in died[0]
    assert "the engine was started again 3 time(s) after it died" in result.stderr
    sidecar = json.loads((tmp_path / "out.jsonl.mmrun.json").read_text())
    assert sidecar["last_run"]["restarts"] == 3 and sidecar["last_run"]["done"] == 30


def test_an_engine_killed_while_it_starts_again_is_one_more_death_in_a_row(
    fake_vllm: Any,
    no_backoff: None,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OOM killer may take the new engine while it loads: that restart counts as a death
    and the next one runs the batch to its end."""
    fake_vllm.die_at = {3}
    starts: list[int] = []
    real_init = fake_vllm.__init__

    def init(self: Any, **engine_args: Any) -> None:
        starts.append(1)
        if len(starts) == 2:
            raise RuntimeError("Engine core initialization failed. See root cause above.")
        real_init(self, **engine_args)

    monkeypatch.setattr(fake_vllm, "__init__", init)
    out = tmp_path / "out.jsonl"
    result = run("--input", str(manifest(tmp_path, 12)), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sorted(r["id"] for r in lines(out)) == sorted(f"q{i}" for i in range(12))
    assert len(starts) == 3
    died = [
        line
        for line in capfd.readouterr().err.splitlines()
        if line.startswith("mmrun: the engine died")
    ]
    assert len(died) == 2, died
    assert "(restart 1 of at most 3 in a row)" in died[0]
    assert died[1].startswith(
        "mmrun: the engine died (it failed to start again: vLLM failed: RuntimeError: Engine "
        "core initialization failed."
    ), died[1]
    assert "0 prompt(s) back in the queue" in died[1]
    assert "(restart 2 of at most 3 in a row)" in died[1]


def test_a_prompt_that_kills_the_engine_becomes_an_error_line_and_the_rest_go_on(
    fake_vllm: Any, no_backoff: None, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    result = run("--input", str(manifest(tmp_path, 20, poison=5)), "-o", str(out))
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    rows = {r["id"]: r for r in lines(out)}
    assert len(lines(out)) == 20 and sorted(rows) == sorted(f"q{i}" for i in range(20))
    failed = [r for r in rows.values() if r["error"] is not None]
    assert [r["id"] for r in failed] == ["q5"]
    assert failed[0]["error"]["stage"] == "engine"
    assert failed[0]["error"]["message"].startswith(
        "the engine died each time this prompt ran alone"
    )
    # Tried with others twice, then alone twice: four engines died, five were started.
    poisoned = [r for r in fake_vllm.submitted if "POISON" in str(r)]
    assert len(poisoned) == 4
    assert "19 done, 1 failed" in result.stderr


def test_no_restarts_ends_the_batch_at_the_first_death_in_one_line_and_it_resumes(
    fake_vllm: Any, no_backoff: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.die_at = {3}
    out = tmp_path / "out.jsonl"
    source = manifest(tmp_path, 12)
    result = run("--input", str(source), "-o", str(out), "--max-restarts", "0")
    assert result.exit_code == EXIT_FAILURE
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "mmrun: error: the engine core stopped without logging a reason (rerun with -v"
    ), last
    assert "the engine died" not in capfd.readouterr().err  # no restart was tried
    written = lines(out)
    assert 0 < len(written) < 12
    again = run("--input", str(source), "-o", str(out))
    assert again.exit_code == 0, again.stderr
    assert sorted(r["id"] for r in lines(out)) == sorted(f"q{i}" for i in range(12))


def test_an_engine_that_keeps_dying_stops_after_the_limit(
    fake_vllm: Any, no_backoff: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.fail_step = RuntimeError("EngineDeadError: the engine died")
    out = tmp_path / "out.jsonl"
    result = run("--input", str(manifest(tmp_path, 6)), "-o", str(out), "--max-restarts", "2")
    assert result.exit_code == EXIT_FAILURE
    last = result.stderr.strip().splitlines()[-1]
    assert "(the engine died 3 times in a row without finishing a prompt; --max-restarts 2)" in (
        last
    )
    assert capfd.readouterr().err.count("mmrun: the engine died") == 2


def test_a_negative_max_restarts_is_a_usage_error(fake_vllm: Any, tmp_path: Path) -> None:
    result = run("--input", str(manifest(tmp_path, 2)), "--max-restarts", "-1")
    assert result.exit_code == 2
    assert "--max-restarts must be 0 or more, got -1" in result.stderr


# --- a full disk -----------------------------------------------------------------------------

FILL = """
import json, sys
from mmrun.errors import OutputError
from mmrun.results import OutputFile
from mmrun.plan import Plan

class FakePlan:  # OutputFile reads the plan's identity only
    pass

import mmrun.results as results
results.identity = lambda plan: {k: None for k in results._IDENTITY}
out = OutputFile(sys.argv[1], FakePlan(), overwrite=False, retry_errors=False)
start = int(sys.argv[2])
try:
    for i in range(start, start + 200):
        out.write({"id": f"p{i}", "text": "x" * 90, "error": None})
except OutputError as exc:
    print(str(exc))
    sys.exit(1)
"""


def _limited(bytes_: int) -> Any:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_, bytes_))

    return limit


def test_a_full_disk_stops_the_run_in_one_line_and_leaves_no_torn_line(tmp_path: Path) -> None:
    """The kernel refuses a write past the file size limit (EFBIG) as it refuses one on a full
    disk (ENOSPC): the line being written is taken back, the file stays whole."""
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    full = subprocess.run(
        [sys.executable, "-c", FILL, str(out), "0"],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=_limited(5000),
        timeout=60,
    )
    assert full.returncode == 1, full.stderr
    assert full.stdout.startswith(f"cannot write to {out}: File too large; the results written")
    text = out.read_text()
    assert text.endswith("\n") and len(text) <= 5000
    kept = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert kept and len(kept) < 200
    sidecar = json.loads((tmp_path / "out.jsonl.mmrun.json").read_text())
    assert sidecar["schema"] == "mmrun.batch/2"
    # Space freed: the next run appends after the last whole line.
    more = subprocess.run(
        [sys.executable, "-c", FILL, str(out), str(len(kept))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert more.returncode == 0, more.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids[: len(kept)] == [f"p{i}" for i in range(len(kept))]
    assert len(ids) == len(kept) + 200 and len(set(ids)) == len(ids)


def test_a_batch_whose_output_disk_fills_up_ends_in_one_line_and_resumes(
    tmp_path: Path,
) -> None:
    """The command as users run it: -o on a disk that fills up (the file size limit stands in
    for it) ends with exit 1 and one line; once there is room, the same command resumes."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(40):
        (folder / f"p{i:02d}.png").write_bytes(PNG)
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "mmrun", "image", "-m", "mistral3", "-i", str(folder)]
    command += ["-o", str(out), "--dry-run", "--quiet"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    full = subprocess.run(
        command, env=env, capture_output=True, text=True, preexec_fn=_limited(6000), timeout=120
    )
    assert full.returncode == EXIT_FAILURE, full.stderr
    assert full.stderr == (
        f"mmrun: error: cannot write to {out}: File too large; the results written before are "
        "kept (free space or choose another -o, then run the same command to resume)\n"
    )
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert 0 < len(kept) < 40
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(str(p) for p in folder.iterdir())


class _Core:
    """An engine core process that has ended, as multiprocessing shows it."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode

    def join(self, timeout: float) -> None:
        pass


def _engine_whose_core_died(monkeypatch: pytest.MonkeyPatch, core: _Core, watch: Any) -> Any:
    """An Engine whose ``step()`` raises vLLM's "EngineCore encountered an issue", with ``core``
    as its engine core process and ``watch`` as mmrun's watch thread."""
    from mmrun.engine import handle

    class Steps:
        def step(self) -> list[Any]:
            raise RuntimeError(
                "EngineCore encountered an issue. See stack trace (above) for the root cause."
            )

    class Llm:
        llm_engine = Steps()

        def enqueue(self, *args: Any, **kwargs: Any) -> list[str]:
            return ["0"]

    monkeypatch.setattr(handle, "engine_core_processes", lambda _: [core])
    monkeypatch.setattr(handle, "engine_core", lambda llm: None)
    monkeypatch.setattr(handle, "watch_engine_core", watch)
    return handle.Engine(Llm())


def test_a_death_told_before_the_watch_thread_saw_it_still_names_the_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM's own monitor may end ``step()`` before mmrun's watch thread has read the exit
    codes: the engine core processes are asked then."""
    engine = _engine_whose_core_died(monkeypatch, _Core(-9), lambda *args: None)
    with pytest.raises(EngineDied) as raised:
        engine.poll()
    assert str(raised.value).startswith(
        "the engine core process was killed by SIGKILL (signal 9): "
        "the kernel's out-of-memory killer sends it too"
    ), str(raised.value)


def test_a_death_whose_exit_code_the_watch_thread_took_still_names_the_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch thread and the death's own join reap the engine core at the same moment: the
    join's waitpid finds nothing (multiprocessing then reports no exit code) and the thread
    records -9 a moment later. The message still names the signal."""
    import threading

    def watch(llm: Any, closed: Any, exits: list[int | None]) -> None:
        threading.Timer(0.2, lambda: exits.append(-9)).start()

    engine = _engine_whose_core_died(monkeypatch, _Core(None), watch)  # the other waitpid took it
    with pytest.raises(EngineDied) as raised:
        engine.poll()
    assert str(raised.value).startswith(
        "the engine core process was killed by SIGKILL (signal 9)"
    ), str(raised.value)
