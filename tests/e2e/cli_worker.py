"""mmrun's real CLI, run in a long-lived worker process that keeps vLLM imported and reuses
one started engine for the runs that would start the same one.

Why: on the 2-core CI machine each ``python -m mmrun`` run pays ``import vllm`` three times
(mmrun's process, then vLLM's engine core and its CPU worker, each a spawned process that
imports vLLM again) before its model loads; the tiny model's own load, profiling and the
generation take a few seconds of it. Here vLLM is imported once per worker, the engine core
runs in the worker's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), and a run whose
engine arguments equal those of the engine still held gets that engine instead of starting
another (what ``generate`` and then ``chat`` of one model do).

What stays real: each run is ``mmrun <args>`` through mmrun's own entry, its error boundary (options, plan,
media download, the model's loader, mmrun's request building, ``engine.Engine`` submitting to
vLLM and reading its outputs, the ``--json`` document), on the real vLLM engine. What is
different from a ``python -m mmrun`` process: the engine core runs in-process (no ZMQ hop),
the engine is not stopped between the runs that share it, and the process does not exit
after a run. The tests of those parts (exit, Ctrl-C, kill, socket files) run the real
command in a process of its own.

A failed run stops its engine; one whose engine failed to start, or a worker that dies (a
crash in native code) or hangs, costs that run only: the next run gets a new worker process.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

# How long one run may take before the worker is killed (a hung engine).
RUN_TIMEOUT_S = 900.0
# A file to which each run appends one JSON line of figures (args, engine start, wall time),
# when set: how the CI time is measured (see the report in the commit that added this).
TIMINGS_ENV = "MMRUN_E2E_TIMINGS"


@dataclass(frozen=True)
class CliRun:
    """What one ``mmrun`` run gave: its exit code and output, and whether it reused the
    engine a run before it had started (``reused``) or started one (``engine_start_s``)."""

    returncode: int
    stdout: str
    stderr: str
    reused: bool
    engine_start_s: float | None
    wall_s: float
    # The engine's logits during the run (see _watch_logits): how many batches of logits the
    # model computed, and how many of them held a NaN; None where the vLLM imported has no
    # LLM.apply_model (the stand-in of tests/helpers/fake_vllm).
    logits_batches: int | None = None
    nan_logits_batches: int | None = None


class CliWorker:
    """The parent's handle on the worker process (started on first use)."""

    def __init__(self, path: Sequence[str] = ()) -> None:
        """``path``: folders put first on the worker's ``sys.path`` (a stand-in vLLM)."""
        self._path = list(path)
        self._process: Any = None
        self._conn: Connection | None = None
        self.starts = 0  # worker processes started

    def run(
        self,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float = RUN_TIMEOUT_S,
    ) -> CliRun:
        """``mmrun <args>`` in the worker, with ``env`` added to its environment for the run."""
        reply = self._call(("run", list(args), dict(env or {})), timeout)
        if reply is None:
            return CliRun(1, "", "the worker process died during the run", False, None, 0.0)
        fresh_process = reply.pop("fresh_process")
        run = CliRun(**reply)
        _record(args, run)
        if fresh_process:
            self.close()
        return run

    def release(self) -> None:
        """Stop the engine the worker holds, if any."""
        if self._conn is not None and self._call(("release",), 120.0) is None:
            self.close()

    def close(self) -> None:
        conn, process, self._conn, self._process = self._conn, self._process, None, None
        if conn is not None:
            with contextlib.suppress(OSError, EOFError):
                conn.send(("stop",))
            conn.close()
        if process is not None:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()

    def _call(self, message: tuple[Any, ...], timeout: float) -> Any:
        if self._conn is None:
            context = multiprocessing.get_context("spawn")
            parent, child = context.Pipe()
            self._process = context.Process(
                target=_serve, args=(child, self._path), name="mmrun-cli-worker"
            )
            self._process.start()
            child.close()
            self._conn = parent
            self.starts += 1
        conn = self._conn
        try:
            conn.send(message)
            if conn.poll(timeout):
                return conn.recv()
        except (OSError, EOFError):
            pass
        self._kill()
        return None

    def _kill(self) -> None:
        from mmrun.engine import kill_engine_processes

        if self._process is not None and self._process.is_alive():
            kill_engine_processes([self._process])
        self.close()


def _record(args: Sequence[str], run: CliRun) -> None:
    path = os.environ.get(TIMINGS_ENV)
    if path:
        figures = {
            "args": " ".join(args[:3]),
            "method": "chat" if "chat" in args else "generate",
            "returncode": run.returncode,
            "reused": run.reused,
            "engine_start_s": run.engine_start_s,
            "wall_s": round(run.wall_s, 2),
        }
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(figures) + "\n")


# --- in the worker process --------------------------------------------------------------------


class _Held:
    """The engine the worker holds, keyed by the engine arguments it was started with."""

    key: str | None = None
    llm: Any = None
    start_s: float | None = None
    # An engine failed to start: what it had set up in this process may be left half done.
    failed_start = False


def _numba_in_process() -> None:
    """Let an engine start in this process after numba is imported.

    vLLM 0.32's CPU worker, at its start, scans the namespace of every module in
    ``sys.modules`` and reads ``vars(value).get("kernel")`` of each value that answers
    ``__dict__`` (vllm/triton_utils/dispatcher.py, ``_rebind_kernels``). llvmlite's library
    handle (``llvmlite.binding.ffi.lib``, imported with numba) answers any attribute with a
    wrapped C function, so the start fails ("'_lib_fn_wrapper' object has no attribute
    'get'"). Kimi K2.5's image processor (vLLM's fused vision-chunk one) imports numba in the
    process that renders the prompt: with the engine core in that process, as here, every
    later engine start in it would fail. A ``python -m mmrun`` process runs its CPU worker in
    a process of its own, which imports numba after the scan. Here the handle gets an empty
    ``__dict__`` answer (its cache of looked-up names), which the scan passes over.
    """
    with contextlib.suppress(ImportError):
        from llvmlite.binding import ffi

        ffi.lib._fntab.setdefault("__dict__", {})


def _one_layer_phi4_vision_tower() -> None:
    """Build Phi-4-multimodal's SigLIP tower with one layer of its 27.

    vLLM builds that tower from a hard-coded config (1152 wide, 448-pixel crops), not from the
    checkpoint's, so the tiny phi4_mm checkpoint cannot shrink it; with ``dynamic_hd`` 4 each
    image is up to five crops of 1,025 patches, and on a 2-core CPU a generate run of the row
    took about ten minutes in that tower alone. Its width, patch grid and output (the image
    tokens the prompt's placeholders expand to) stay as they are; the weights are random in
    any case (``load_format="dummy"``). Runs of their own (``python -m mmrun``) keep the full
    tower."""
    with contextlib.suppress(ImportError):
        from vllm.model_executor.models import phi4mm

        build = phi4mm.get_navit_vision_model

        def one_layer(layer_idx: int = -1, **kwargs: Any) -> Any:
            return build(layer_idx=0, **kwargs)

        phi4mm.get_navit_vision_model = one_layer


def _serve(conn: Connection, path: list[str]) -> None:
    sys.path[:0] = path
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    _numba_in_process()
    _one_layer_phi4_vision_tower()
    from mmrun import engine

    real_start, real_close = engine.start, engine.Engine.close

    def start(engine_args: Mapping[str, Any], abort: Any = None, **options: Any) -> Any:
        key = json.dumps(engine_args, sort_keys=True, default=str)
        if _Held.llm is not None and _Held.key == key:
            _Held.start_s = None
            return _Held.llm
        _drop(engine)
        t0 = time.perf_counter()
        try:
            _Held.llm = real_start(engine_args, abort, **options)
        except BaseException:
            _Held.failed_start = True
            raise
        _Held.key, _Held.start_s = key, time.perf_counter() - t0
        _watch_logits(_Held.llm)
        return _Held.llm

    def close(self: Any) -> None:
        if self.llm is not _Held.llm:
            real_close(self)

    engine.start = start
    engine.Engine.close = close  # type: ignore[method-assign]
    from mmrun.cli.main import run

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message[0] == "run":
            conn.send(_run(run, message[1], message[2]))
        elif message[0] == "release":
            _drop(engine)
            conn.send("released")
        else:
            break
    _drop(engine)
    engine.remove_temporary_files()


def _run(run: Any, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One command line through the CLI's own entry (``mmrun.cli.main.run``: its error
    boundary prints a failure's one line and gives its exit code)."""
    held_before = _Held.llm
    _Held.start_s = None
    _Logits.batches = _Logits.nan_batches = 0
    t0 = time.perf_counter()
    with _environment(env), _captured() as output:
        try:
            code = run(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if code != 0:  # the engine of a failed run is not reused
        from mmrun import engine

        _drop(engine)
    return {
        "returncode": code,
        "stdout": output["stdout"],
        "stderr": output["stderr"],
        "reused": held_before is not None and _Held.llm is held_before and _Held.start_s is None,
        "engine_start_s": _Held.start_s,
        "wall_s": time.perf_counter() - t0,
        "fresh_process": _Held.failed_start,
        "logits_batches": _Logits.batches if _Logits.watched else None,
        "nan_logits_batches": _Logits.nan_batches if _Logits.watched else None,
    }


class _Logits:
    """What the held engine's model computed as logits during the current run."""

    watched = False
    batches = 0
    nan_batches = 0


def _watch_logits(llm: Any) -> None:
    """Count the batches of logits with a NaN, through a forward hook on each of the model's
    vLLM LogitsProcessor modules (installed by LLM.apply_model: the engine core and its
    model are in this process). Why: on all-NaN logits the CPU sampler returns id 0, so a
    checkpoint whose weights give NaN (a dummy-initialised BatchNorm: negative running_var)
    still generates tokens and passes the other checks; CUDA's sampler then picks an id
    past the vocabulary and the engine crashes."""
    _Logits.watched = False
    apply_model = getattr(llm, "apply_model", None)
    if apply_model is None:
        return

    def install(model: Any) -> int:
        import torch
        from vllm.model_executor.layers.logits_processor import LogitsProcessor

        def hook(module: Any, args: Any, logits: torch.Tensor) -> None:
            _Logits.batches += 1
            if bool(torch.isnan(logits).any()):
                _Logits.nan_batches += 1

        # With LoRA, vLLM wraps the model's LogitsProcessor (LogitsProcessorWithLoRA, which
        # runs the base class's forward on itself): hook the wrapper, which is what is called.
        found = [
            m
            for m in model.modules()
            if isinstance(m, LogitsProcessor)
            or isinstance(getattr(m, "base_layer", None), LogitsProcessor)
        ]
        for module in found:
            module.register_forward_hook(hook)
        return len(found)

    _Logits.watched = sum(apply_model(install)) > 0


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, str]]:
    """File descriptors 1 and 2 into temporary files for the block (mmrun itself points
    descriptors around while vLLM runs); what was written, in the dict yielded, after it."""
    with (
        tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out,
        tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err,
    ):
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        output: dict[str, str] = {}
        try:
            yield output
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for name, file in (("stdout", out), ("stderr", err)):
                file.seek(0)
                output[name] = file.read()


def _drop(engine: Any) -> None:
    """Stop the held engine with mmrun's own shutdown: for an engine core in this process that
    is vLLM's in-process teardown (its model, KV cache and parallel state freed), after which
    another engine can start here."""
    llm, _Held.llm, _Held.key = _Held.llm, None, None
    if llm is not None:
        engine.shutdown(llm, now=True)
