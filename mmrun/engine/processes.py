"""This process and the engine's processes: Ctrl-C and SIGTERM while vLLM starts or
generates, killing a process tree, the watchdog that notices a dead engine core, and the
warm-up thread that runs once the engine core has been forked."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from mmrun.vllm_internals import (
    engine_core,
    engine_core_processes,
    engine_dead_error,
    frontend_processor_loader,
    output_queue,
)


@contextlib.contextmanager
def _on_interrupt(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """``handler`` for Ctrl-C (SIGINT) and SIGTERM until the block ends; then the handlers
    that were there before (Python's own where there was none)."""
    previous = signal.signal(signal.SIGINT, handler)
    previous_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(
            signal.SIGINT, previous if previous is not None else signal.default_int_handler
        )
        signal.signal(
            signal.SIGTERM, previous_term if previous_term is not None else signal.SIG_DFL
        )


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (or SIGTERM) until the block ends, then raise it as KeyboardInterrupt: for
    vLLM's import, which imports torch and numpy. A KeyboardInterrupt raised inside a C
    extension's initialisation can be swallowed there and leave the module half-initialised in
    ``sys.modules``: the run then went on as if never interrupted, or failed later on a
    missing attribute of numpy's. A second Ctrl-C is not held: it raises at once, as Python's
    own handler would."""
    if threading.current_thread() is not threading.main_thread():  # handlers: main thread only
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if held:
            raise KeyboardInterrupt
        held.append(signum)

    try:
        with _on_interrupt(hold):
            yield
    except Exception as exc:
        if held:
            raise KeyboardInterrupt from exc
        raise
    if held:
        raise KeyboardInterrupt


@contextlib.contextmanager
def interruptible(abort: threading.Event | None = None) -> Iterator[threading.Event]:
    """Make Ctrl-C (or SIGTERM) stop vLLM for sure while it starts or generates; yields the
    "interrupted" flag.

    vLLM swallows KeyboardInterrupt in part of its start-up (its ``zmq_socket_ctx`` catches it)
    and then waits up to 10 minutes for an engine that was told to stop, or finishes starting
    as if nothing had happened. So once interrupted, a watchdog interrupts the main thread
    again every second until the block is left; from the second time on, the handler also
    kills the engine processes (see kill_engine_processes). Whatever vLLM raises after an
    interrupt ends as the interrupt.

    Setting ``abort`` (from any thread) kills the engine's processes, at once and any started
    later, until the block is left: vLLM then fails its start, and no exception is raised into
    the main thread at an arbitrary point (one landing inside an import can leave Python's
    import lock held, and another thread waiting on it forever).
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # handlers: main thread only
        yield interrupted
        return
    left = threading.Event()
    lock = threading.Lock()
    main = threading.main_thread().ident

    def keep_interrupting() -> None:
        while not left.wait(1.0):
            with lock:
                if not left.is_set() and main is not None:
                    signal.pthread_kill(main, signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if interrupted.is_set():  # the interrupt did not get through: stop the engine itself
            kill_engine_processes()
        else:
            interrupted.set()
            threading.Thread(target=keep_interrupting, name="mmrun-interrupt", daemon=True).start()
        raise KeyboardInterrupt

    def watch_abort(event: threading.Event) -> None:
        while not left.wait(0.05):
            if event.is_set():
                with lock:
                    if not left.is_set():
                        kill_engine_processes()

    with _on_interrupt(on_interrupt):
        if abort is not None:
            threading.Thread(
                target=watch_abort, args=(abort,), name="mmrun-abort", daemon=True
            ).start()
        try:
            yield interrupted
        except Exception as exc:
            if interrupted.is_set():
                raise KeyboardInterrupt from exc
            raise
        finally:
            with lock:
                left.set()


def kill_engine_processes(processes: Sequence[Any] | None = None) -> None:
    """SIGKILL the engine's processes (by default all the processes this one started: vLLM's
    engine core) and their children (its workers). SIGTERM is not enough: an engine core that
    is still starting defers it until it has loaded the model, and workers whose engine core
    is gone run on until they notice."""
    for child in multiprocessing.active_children() if processes is None else processes:
        below = descendants(child.pid)
        with contextlib.suppress(Exception):  # already gone
            child.kill()
        for process in below:
            with contextlib.suppress(Exception):  # already gone
                process.kill()


def descendants(pid: int | None) -> list[Any]:
    try:
        import psutil  # a dependency of vLLM, not of mmrun
    except ImportError:
        return []
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


# How long a started engine waits for the warm-up to end (it only does what the first request
# would do anyway, about a second).
WARM_JOIN_S = 30.0


def warm_up_when_forked(
    work: Callable[[], None],
    constructed: threading.Event,
    failed: threading.Event,
    starter: int | None = None,
    timings: dict[str, float] | None = None,
) -> None:
    """``work`` while the engine starts, and not while vLLM's frontend imports transformers:
    two threads importing it at once broke vLLM's start on the H200 ("cannot import name
    'PretrainedConfig' from 'transformers'", docs/performance.md). The frontend has built its
    config, tokenizer and processor objects by the time it starts its engine core process,
    then only waits for it (tens of seconds on a GPU), so the work waits for that process. An
    engine without processes of its own (VLLM_ENABLE_V1_MULTIPROCESSING=0) gives no such
    moment: the work then runs once ``vllm.LLM`` has returned, before the first request; not
    at all when it failed. A failure of the work is left for the real work to report.

    Before ``work``, while thread ``starter`` still waits for the engine core: vLLM's own
    frontend loads the model's Hugging Face processor (``warm_vllm_frontend``), which it would
    otherwise do on the first request, with the engine ready and the GPU idle. The seconds it
    took go to ``timings["frontend_warm_s"]``."""
    while not constructed.wait(0.05):
        if has_children():
            break
    if failed.is_set():
        return
    if starter is not None and not constructed.is_set():
        spent = warm_vllm_frontend(starter)
        if spent is not None and timings is not None:
            timings["frontend_warm_s"] = spent
    with contextlib.suppress(Exception):
        work()


def warm_vllm_frontend(starter: int) -> float | None:
    """Load the model's Hugging Face processor in vLLM's frontend now, into the cache its
    first multimodal request reads (see vllm_internals.frontend_processor_loader); the seconds
    it took, or None where there was nothing to load. vLLM 0.26 to 0.28 load it on the first
    request or once the engine is ready, with the GPU waiting (docs/performance.md). Nothing
    is processed, so vLLM's caches of processed media are left alone."""
    load = frontend_processor_loader(starter)
    if load is None:
        return None
    began = time.perf_counter()
    try:
        load()
    except Exception:  # the first request then loads it, and reports what is wrong
        return None
    return time.perf_counter() - began


def has_children() -> bool:
    try:
        return bool(multiprocessing.active_children())
    except Exception:  # the main thread starting a process meanwhile
        return False


def watch_engine_core(
    llm: Any, closed: threading.Event, exits: list[int | None] | None = None
) -> None:
    """Wake ``poll`` when the engine core process dies.

    ``llm_engine.step()`` waits on the queue that vLLM's output thread fills. When the engine
    core process dies (the OOM killer, a crash), vLLM 0.32's monitor marks the engine dead and
    stops that thread without putting anything in the queue, so the wait never ends (seen:
    a ``-dp 2`` replica whose engine core was killed hung for good, holding its prompts). This
    thread waits on the engine core processes and then puts vLLM's own EngineDeadError in the
    queue, which ``step()`` raises. The processes' exit codes go to ``exits`` (a negative one:
    killed by that signal). An engine run in this process has nothing to watch."""
    core = engine_core(llm)
    processes = engine_core_processes(core)
    queue = output_queue(core)
    if not processes or queue is None:
        return
    sentinels = [p.sentinel for p in processes]

    def watch() -> None:
        from multiprocessing.connection import wait

        wait(sentinels)
        if closed.is_set():
            return
        if exits is not None:
            for process in processes:
                with contextlib.suppress(Exception):
                    process.join(1.0)
                exits.append(getattr(process, "exitcode", None))
        with contextlib.suppress(Exception):  # any exception in the queue ends the wait
            queue.put_nowait(engine_dead_error())

    threading.Thread(target=watch, name="mmrun-engine-watch", daemon=True).start()
