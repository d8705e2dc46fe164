"""Several engines on one host (``-dp N``): one coordinator, N replicas, one shared queue.

vLLM runs dense models data-parallel offline only as independent engines (its own
``data_parallel_size`` refuses them), so this process starts N replica processes, each with
its own devices (``CUDA_VISIBLE_DEVICES``; on the CPU build, its own cores), its own vLLM
engine and its own media decoding, running the same engine loop as a one-engine batch. The
coordinator (this process) owns the prompts, the output file, the progress and the summary.

Prompts are handed out on demand: a replica asks for more once its engine is up and whenever
it has room, so a slow replica takes fewer and never holds the others up. A replica that dies
(its engine runs out of memory, its process is killed) is reported and started again (at
most --max-restarts times); the prompts it had not finished go back to the queue, to whichever
replica asks first. An engine that dies inside a replica is started again there
(mmrun.restarts). The run fails only if every replica is gone.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from mmrun.devices import Replica
from mmrun.errors import EngineError
from mmrun.item import Item
from mmrun.outcome import Hooks, ItemError, Outcome, Sink, Stats
from mmrun.plan import Plan, Recipe

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


def replica_main(
    conn: Connection, recipe: Recipe, replica: Replica, quiet: bool, verbose: bool = False
) -> None:
    """A replica process: its own engine on its own devices, prompts from the coordinator,
    each outcome sent back as soon as it is known."""
    replica.apply()
    with contextlib.suppress(ImportError):  # `ps` shows which replica this is (vLLM's dependency)
        import setproctitle

        setproctitle.setproctitle(f"mmrun: replica {replica.index} ({replica.describe()})")
    from mmrun.engine.output import engine_output
    from mmrun.plugins import get_registry
    from mmrun.runner import run_engine_batch
    from mmrun.support import vllm_info
    from mmrun.templates import HFTemplateRenderer

    def emit(outcome: Outcome) -> None:
        conn.send(("outcome", _outcome_message(outcome)))

    engine = None
    try:
        with engine_output(quiet, verbose=verbose):
            the_plan = recipe.plan(get_registry(), vllm_info())
            hooks = Hooks(
                on_started=lambda total: conn.send(("ready", None)),
                on_notice=lambda text, warning: conn.send(("notice", (text, warning))),
            )
            stats, engine = run_engine_batch(
                the_plan, HFTemplateRenderer, emit, _Inbox(conn), hooks=hooks, prefetch=False
            )
            if engine is not None:
                engine.close()
        conn.send(("done", stats.restarts))
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
        "completion": done,  # a frozen dataclass of plain values: pickled as it is
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
    restarts: int = 0  # of its process (a lost replica is started again)


class _FailFast(Exception):
    """--fail-fast: a prompt failed; stop every replica."""


class Replicas:
    """The coordinator of ``-dp N``: starts one replica process per entry of the plan's
    layout, hands out prompts on demand, and gives each outcome (with its replica) to the
    sink. A replica that dies is reported and its unfinished prompts go to the others."""

    name = "replicas"

    def __init__(self, plan: Plan, *, quiet: bool, verbose: bool = False) -> None:
        self.plan = plan
        self.quiet = quiet
        self.verbose = verbose
        self._running: list[_Running] = []
        self._requeued: collections.deque[Item] = collections.deque()
        self._items: Iterator[Item] = iter(())
        self._source_done = False
        self._lost: list[str] = []
        self._restarts = 0  # engines and replica processes started again

    def run(self, items: Iterator[Item], emit: Sink, hooks: Hooks) -> Stats:
        stats = Stats()
        t0 = time.perf_counter()
        self._items = items
        if hooks.on_engine_start is not None:
            hooks.on_engine_start()
        try:
            self._start(self.plan.recipe())
            started = False
            while any(not r.finished for r in self._running):
                for run, kind, payload in self._messages():
                    if kind == "ready":
                        run.ready = True
                        hooks.notice(
                            f"mmrun: replica {run.replica.index} ({run.replica.describe()}) "
                            f"ready after {time.perf_counter() - t0:.1f}s"
                        )
                        if not started and hooks.on_started is not None:
                            started = True
                            hooks.on_started(self.plan.items.total)
                    elif kind == "outcome":
                        outcome = _outcome(run.assigned.pop(payload["id"]), payload, run)
                        stats.record(outcome)
                        emit(outcome)
                        if self.plan.fail_fast and stats.failed:
                            raise _FailFast
                    elif kind == "notice":  # its engine died and was started again
                        text, warning = payload
                        hooks.notice(
                            text.replace("mmrun: ", f"mmrun: replica {run.replica.index}: ", 1),
                            warning=warning,
                        )
                    elif kind in ("lost", "gave_up"):
                        self._lose(run, str(payload), hooks, again=kind == "lost")
            if self._requeued or (not self._source_done and next(items, None) is not None):
                raise EngineError(
                    f"every replica stopped before the batch was done ({'; '.join(self._lost)})",
                    hint="run the same command again to resume; lower -dp or max_num_seqs "
                    "if they ran out of memory",
                )
        except _FailFast:
            pass
        finally:
            self.close()
        stats.timings = {"total_s": time.perf_counter() - t0}
        stats.restarts = self._restarts
        return stats

    def close(self) -> None:
        for run in self._running:
            if run.process.is_alive():
                _kill_tree(run.process.pid)
            run.process.join(timeout=10)

    def _start(self, recipe: Recipe) -> None:
        """One process per replica. They rebuild the plan from its recipe (names, not
        objects), without the prompts, which come from here."""
        for replica in self.plan.engines.layout:
            process, conn = self._spawn(recipe, replica)
            self._running.append(_Running(replica, process, conn, {}))

    def _spawn(self, recipe: Recipe, replica: Replica) -> tuple[Any, Connection]:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(
            target=replica_main,
            args=(child, recipe, replica, self.quiet, self.verbose),
            name=f"mmrun-replica-{replica.index}",
        )
        process.start()
        child.close()
        return process, parent

    def _messages(self) -> Iterator[tuple[_Running, str, Any]]:
        """The replicas' messages of the next second; a request for prompts is answered
        here, a replica that is gone is reported as ("lost", why)."""
        alive = [r for r in self._running if not r.finished]
        waitables: list[Any] = [r.conn for r in alive] + [r.process.sentinel for r in alive]
        for ready in wait(waitables, timeout=1.0):
            run = next((r for r in alive if ready in (r.conn, r.process.sentinel)), None)
            if run is None or run.finished:  # None: a replica's old process, started again
                continue
            ended = _ended(run)
            if ready is run.process.sentinel and not run.conn.poll():
                yield run, "lost", ended
                continue
            try:
                kind, payload = run.conn.recv()
            except (EOFError, OSError):
                yield run, "lost", ended
                continue
            if kind == "want":
                try:
                    self._hand_out(run, int(payload))
                except OSError:  # it died after asking (BrokenPipeError): the prompts just
                    # given to it go back to the queue with the rest of its own
                    yield run, "lost", _ended(run)
            elif kind == "done":
                run.finished = True
                self._restarts += int(payload or 0)
                run.process.join(timeout=30)
            elif kind == "failed":  # its engine failed past --max-restarts: not started again
                yield run, "gave_up", payload
            else:
                yield run, kind, payload

    def _hand_out(self, run: _Running, count: int) -> None:
        given: list[Item] = []
        while len(given) < count and self._requeued:
            given.append(self._requeued.popleft())
        while len(given) < count and not self._source_done:
            item = next(self._items, None)
            if item is None:
                self._source_done = True
            else:
                given.append(item)
        if given:
            for item in given:
                run.assigned[item.id] = item
            run.conn.send(("items", given))
        elif (
            self._source_done
            and not self._requeued
            and not any(r.assigned for r in self._running if r is not run and not r.finished)
        ):
            run.conn.send(("end", None))
        else:
            run.conn.send(("items", []))  # nothing now: ask again

    def _lose(self, run: _Running, reason: str, hooks: Hooks, *, again: bool) -> None:
        """A replica that stopped: its unfinished prompts go back to the queue (whichever
        replica asks first takes them). One whose process died (``again``) is started again,
        up to --max-restarts times; one whose engine kept dying (it restarts its engine
        itself, mmrun.restarts) is not."""
        back = list(run.assigned.values())
        self._requeued.extend(back)
        run.assigned.clear()
        with contextlib.suppress(Exception):
            _kill_tree(run.process.pid)
        run.process.join(timeout=10)
        again = again and run.restarts < self.plan.engines.max_restarts
        hooks.notice(
            f"mmrun: replica {run.replica.index} ({run.replica.describe()}) stopped: {reason}; "
            f"its {len(back)} unfinished prompt(s) go back to the queue"
            + (
                f"; starting it again (restart {run.restarts + 1} of {self.plan.engines.max_restarts})"
                if again
                else ""
            ),
            warning=True,
        )
        if not again:
            run.finished = True
            self._lost.append(f"replica {run.replica.index}: {reason}")
            return
        run.restarts += 1
        self._restarts += 1
        run.process, run.conn = self._spawn(self.plan.recipe(), run.replica)
        run.ready = False


def _ended(run: _Running) -> str:
    """Why a replica is gone: its exit code, or a broken pipe while its process still runs
    (it is killed then)."""
    code = run.process.exitcode
    if code is None:
        return "its connection to mmrun broke"
    return f"its process ended (exit code {code})"


def _outcome(item: Item, payload: Mapping[str, Any], run: _Running) -> Outcome:
    completion = payload["completion"]
    error = payload["error"]
    return Outcome(
        item=item,
        question=payload["question"],
        completion=completion,
        error=None if error is None else ItemError(error[0], error[1]),
        replica=run.replica.index,
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
