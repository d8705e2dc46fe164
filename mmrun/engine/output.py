"""Where the engine's output goes: the log file that vLLM's log stream copies to in every
engine process (mmrun.engine.log_stream), the engine's standard output and error pointed
there or to stderr, away from the results, and mmrun's own lines to the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import TextIO

from mmrun.engine import log_stream
from mmrun.engine.environment import is_temporary, remember_temporary


def use_engine_log() -> str | None:
    """Where the engine's processes also write their log (see log_stream), when vLLM's log
    stream is mmrun's: the file's path. Without -v, what they print besides (tracebacks,
    progress bars) goes there too (see engine_output)."""
    if os.environ.get("VLLM_LOGGING_STREAM") != log_stream.STREAM_SPEC:
        return None
    path = os.environ.get(log_stream.ENV)
    if path is None or not is_temporary(path):
        handle, path = tempfile.mkstemp(prefix="mmrun-engine-", suffix=".log")
        os.close(handle)
        remember_temporary(path)
        os.environ[log_stream.ENV] = path
    with contextlib.suppress(OSError):  # a second engine in this process: its part only
        _log_start[0] = os.path.getsize(path)
    return path


_log_start = [0]  # where the current engine's part of the log begins


def engine_log_part() -> tuple[str, int] | None:
    """The engine log this process set up, and where the current engine's part begins."""
    path = os.environ.get(log_stream.ENV)
    if not path or not is_temporary(path):
        return None
    return path, _log_start[0]


@contextlib.contextmanager
def _redirect(fd: int, target: int) -> Iterator[None]:
    """Point file descriptor ``fd`` at ``target`` (another descriptor) until the block ends."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while vLLM runs, so that nothing it or its worker
    processes print can mix into the results that mmrun prints on stdout afterwards."""
    with _redirect(1, 2):
        yield


@contextlib.contextmanager
def engine_output(quiet: bool, verbose: bool = False) -> Iterator[TextIO]:
    """Where what vLLM, torch and transformers print goes while a run is planned and executed:
    with ``-v`` to stderr; else to the engine's log file (see log_stream), which the engine's
    processes inherit as their stdout and stderr when vLLM starts them: a traceback in a
    worker, an interrupted child, the progress bars of a CUDA graph capture or Ray's logs are
    kept there, and mmrun reads the reason for a failure back out of it. mmrun's own lines
    (progress, notes) still reach the terminal: they are written to ``terminal_stderr()``.
    ``quiet`` changes nothing here (mmrun's --quiet prints no notes of its own). Yields the
    stream that results go to meanwhile (standard output as it was before: a batch prints
    each result as it is done). A failure ends as mmrun's one-line error, printed by the
    error boundary once the descriptors are restored."""
    results = _results_stream()
    try:
        if verbose:
            with stdout_to_stderr():
                yield results
            return
        path = use_engine_log()
        target = os.open(path or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        sys.stderr.flush()
        saved = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        _saved_stderr.append(saved)
        try:
            with _redirect(1, target), _redirect(2, target):
                yield results
        finally:
            _saved_stderr.pop()
            saved.close()
            os.close(target)
    finally:
        results.flush()
        if results is not sys.stdout:
            results.close()


_saved_stderr: list[TextIO] = []  # the terminal's stderr while engine_output points fd 2 away


def terminal_stderr() -> TextIO:
    """The stream for mmrun's own lines on stderr: the process's stderr, or, while
    engine_output sends the engine's output to its log, the stderr that was there before."""
    return _saved_stderr[-1] if _saved_stderr else sys.stderr


def _results_stream() -> TextIO:
    """A stream on the standard output of now, untouched by the redirections that follow; the
    standard output object itself where it is no file descriptor (a test's capture)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stdout
    sys.stdout.flush()
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace")
