"""Several engines on one host (``-dp N``): one coordinator, N replicas, one shared queue.

vLLM runs dense models data-parallel offline only as independent engines (its own
``data_parallel_size`` refuses them), so this process starts N replica processes, each with
its own devices (``CUDA_VISIBLE_DEVICES``; on the CPU build, its own cores), its own vLLM
engine and its own media decoding, running the same engine loop as a one-engine batch. The
coordinator (this process) owns the prompts, the output file, the progress and the summary.

Prompts are handed out on demand: a replica asks for more once its engine is up and whenever
it has room, so a slow replica takes fewer and never holds the others up. A replica that dies
(its engine runs out of memory, its process is killed) is reported; the prompts it had not
finished go back to the queue for the others. The run fails only if every replica dies.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from mmrun.devices import Replica
from mmrun.errors import EngineError
from mmrun.inputs import Item
from mmrun.plan import Plan, Recipe
from mmrun.results import Completion, ItemError, Outcome
from mmrun.runner import Hooks, Stats

# Set by the CLI for -v: the replicas (processes of their own) show vLLM's log too.
VERBOSE_ENV = "MMRUN_VERBOSE"

# How many prompts a replica asks for at a time (it asks again as soon as it has room).
CHUNK = 8


# --- the replica's side --------------------------------------------------------------------


class _Inbox:
    """The replica's stream of prompts, asked of the coordinator in chunks; None while the
    coordinator has none to give yet (it may, if another replica dies)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._buffer: collections.deque[Item] = collections.deque()
        self._asked = False
        self._ended = False

    def __iter__(self) -> Iterator[Item | None]:
        return self

    def __next__(self) -> Item | None:
        if self._buffer:
            return self._buffer.popleft()
        if self._ended:
            raise StopIteration
        if not self._asked:
            self._conn.send(("want", CHUNK))
            self._asked = True
        if not self._conn.poll():
            return None
        kind, payload = self._conn.recv()
        self._asked = False
        if kind == "end":
            self._ended = True
            raise StopIteration
        self._buffer.extend(payload)  # "items"
        return self._buffer.popleft() if self._buffer else None

    def wait(self, timeout: float) -> None:
        """Wait, with nothing in flight, until the coordinator answers (or ``timeout``)."""
        self._conn.poll(timeout)


def replica_main(conn: Connection, recipe: Recipe, replica: Replica, quiet: bool) -> None:
    """A replica process: its own engine on its own devices, prompts from the coordinator,
    each outcome sent back as soon as it is known."""
    replica.apply()
    with contextlib.suppress(ImportError):  # `ps` shows which replica this is (vLLM's dependency)
        import setproctitle

        setproctitle.setproctitle(f"mmrun: replica {replica.index} ({replica.describe()})")
    from mmrun.engine.environment import engine_output
    from mmrun.plan import replica_plan
    from mmrun.plugins import get_registry
    from mmrun.runner import run_batch
    from mmrun.support import vllm_info
    from mmrun.templates import HFTemplateRenderer

    def emit(outcome: Outcome) -> None:
        conn.send(("outcome", _outcome_message(outcome)))

    engine = None
    try:
        with engine_output(quiet, verbose=os.environ.get(VERBOSE_ENV) == "1"):
            the_plan = replica_plan(recipe, get_registry(), vllm_info())
            hooks = Hooks(on_started=lambda total: conn.send(("ready", None)))
            _, engine = run_batch(
                the_plan, HFTemplateRenderer, emit, _Inbox(conn), hooks=hooks, prefetch=False
            )
            if engine is not None:
                engine.close()
        conn.send(("done", None))
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # report, then end: the coordinator re-queues our prompts
        with contextlib.suppress(OSError):
            conn.send(("failed", str(exc) or type(exc).__name__))
    finally:
        with contextlib.suppress(Exception):
            if engine is not None:
                engine.close()
        sys.stdout.flush()
        os._exit(0)


def _outcome_message(outcome: Outcome) -> dict[str, Any]:
    done = outcome.completion
    return {
        "id": outcome.item.id,
        "completion": None
        if done is None
        else [
            done.text,
            done.prompt_tokens,
            done.completion_tokens,
            done.finish_reason,
            done.parsed,
        ],
        "error": None if outcome.error is None else [outcome.error.stage, outcome.error.message],
        "question": outcome.question,
    }


# --- the coordinator's side ----------------------------------------------------------------


@dataclass
class _Running:
    replica: Replica
    process: Any
    conn: Connection
    assigned: dict[str, Item]
    ready: bool = False
    finished: bool = False


def run_parallel(
    plan: Plan,
    emit: Callable[[Outcome], None],
    items: Iterator[Item],
    replicas: list[Replica],
    *,
    quiet: bool,
    hooks: Hooks | None = None,
    on_replica_lost: Callable[[Replica, str, int], None] | None = None,
    on_replica_ready: Callable[[Replica, float], None] | None = None,
) -> Stats:
    """Run the batch on every replica; each outcome (with its replica) to ``emit``."""
    hooks = hooks or Hooks()
    stats = Stats()
    t0 = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    # The replicas rebuild the plan from its recipe (names, not objects: a plugin's modality
    # may hold functions that do not pickle), without the prompts, which come from here.
    recipe = plan.recipe()
    running: list[_Running] = []
    requeued: collections.deque[Item] = collections.deque()
    source_done = False
    started = False
    lost: list[str] = []
    if hooks.on_engine_start is not None:
        hooks.on_engine_start()
    try:
        for replica in replicas:
            parent, child = context.Pipe()
            process = context.Process(
                target=replica_main,
                args=(child, recipe, replica, quiet),
                name=f"mmrun-replica-{replica.index}",
            )
            process.start()
            child.close()
            running.append(_Running(replica, process, parent, {}))

        def hand_out(run: _Running, count: int) -> None:
            nonlocal source_done
            given: list[Item] = []
            while len(given) < count and requeued:
                given.append(requeued.popleft())
            while len(given) < count and not source_done:
                item = next(items, None)
                if item is None:
                    source_done = True
                else:
                    given.append(item)
            if given:
                for item in given:
                    run.assigned[item.id] = item
                run.conn.send(("items", given))
            elif (
                source_done
                and not requeued
                and not any(r.assigned for r in running if r is not run and not r.finished)
            ):
                run.conn.send(("end", None))
            else:
                run.conn.send(("items", []))  # nothing now: ask again

        def lose(run: _Running, reason: str) -> None:
            run.finished = True
            back = list(run.assigned.values())
            requeued.extend(back)
            run.assigned.clear()
            lost.append(f"replica {run.replica.index}: {reason}")
            if on_replica_lost is not None:
                on_replica_lost(run.replica, reason, len(back))
            with contextlib.suppress(Exception):
                _kill_tree(run.process.pid)

        while any(not r.finished for r in running):
            alive = [r for r in running if not r.finished]
            waitables: list[Any] = [r.conn for r in alive] + [r.process.sentinel for r in alive]
            for ready in wait(waitables, timeout=1.0):
                run = next(r for r in alive if ready in (r.conn, r.process.sentinel))
                if run.finished:
                    continue
                if ready is run.process.sentinel and not run.conn.poll():
                    code = run.process.exitcode
                    lose(run, f"its process ended (exit code {code})")
                    continue
                try:
                    kind, payload = run.conn.recv()
                except (EOFError, OSError):
                    lose(run, f"its process ended (exit code {run.process.exitcode})")
                    continue
                if kind == "ready":
                    run.ready = True
                    if on_replica_ready is not None:
                        on_replica_ready(run.replica, time.perf_counter() - t0)
                    if not started and hooks.on_started is not None:
                        started = True
                        hooks.on_started(plan.items.total)
                elif kind == "want":
                    try:
                        hand_out(run, int(payload))
                    except OSError:  # it died after asking (BrokenPipeError): the prompts
                        # just given to it go back to the queue with the rest of its own
                        lose(run, f"its process ended (exit code {run.process.exitcode})")
                elif kind == "outcome":
                    item = run.assigned.pop(payload["id"])
                    outcome = _outcome(item, payload, run.replica.index)
                    stats.record(outcome)
                    emit(outcome)
                    if plan.options.fail_fast and stats.failed:
                        raise _FailFast
                elif kind == "done":
                    run.finished = True
                    run.process.join(timeout=30)
                elif kind == "failed":
                    lose(run, str(payload))
        if requeued or (not source_done and next(items, None) is not None):
            raise EngineError(
                f"every replica stopped before the batch was done ({'; '.join(lost)})",
                hint="run the same command again to resume; lower -dp or max_num_seqs if they ran out of memory",
            )
    except _FailFast:
        pass
    finally:
        for run in running:
            if run.process.is_alive():
                _kill_tree(run.process.pid)
            run.process.join(timeout=10)
    stats.timings = {"total_s": time.perf_counter() - t0}
    return stats


class _FailFast(Exception):
    """--fail-fast: a prompt failed; stop every replica."""


def _outcome(item: Item, payload: Mapping[str, Any], replica: int) -> Outcome:
    completion = payload["completion"]
    error = payload["error"]
    return Outcome(
        item=item,
        question=payload["question"],
        completion=None if completion is None else Completion(*completion),
        error=None if error is None else ItemError(error[0], error[1]),
        replica=replica,
    )


def _kill_tree(pid: int | None) -> None:
    """SIGKILL a replica and every process under it (its engine core, the engine's workers)."""
    from mmrun.engine import descendants

    for process in descendants(pid):
        with contextlib.suppress(Exception):
            process.kill()
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
