"""What decoding libraries print, kept out of mmrun's output.

Pillow, libtiff, libsndfile and libmpg123 report what they find wrong with a file in four ways:
Python warnings, Python log records (Pillow's loggers), exceptions raised inside C callbacks
(soundfile's virtual file I/O), which Python prints with a traceback, and lines that C code
writes to its ``stderr`` stream. While a decode runs, :func:`library_output` collects all four
for that decode, so that a refused file ends as mmrun's one line and an accepted one prints
nothing; ``mmrun -v`` passes them on to stderr (see :func:`show_library_output`).

Decoders run in several worker threads at once, while the main thread starts vLLM. Warnings,
log records and callback exceptions are raised in the thread that decodes, so they are routed
per thread. C lines are caught by pointing the C library's ``stderr`` stream (a ``FILE *``) at
a temporary file while any decode runs, not by redirecting file descriptor 2: a process that
vLLM starts meanwhile would inherit a redirected descriptor for its whole life, whereas the
stream is this process's alone, and Python's own writes to stderr (vLLM's log, mmrun's
lines) never go through it. This needs a C library whose ``stderr`` can be swapped (glibc,
macOS); elsewhere the C lines pass through as before.

Imports only the standard library: ``mmrun --help`` pays nothing for it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

_show = False


def show_library_output(show: bool) -> None:
    """With ``show`` (``mmrun -v``), what decoders print is passed on to stderr after each
    decode; without it, it is only kept for :attr:`Captured.failure`."""
    global _show
    _show = show


@dataclass
class Captured:
    """What the libraries said during one decode."""

    lines: list[str] = field(default_factory=list)
    # An exception a C callback raised and Python could only print ("Exception ignored ..."):
    # the decode's own error is then a consequence of it.
    failure: str | None = None


_local = threading.local()


def _sink() -> Captured | None:
    return getattr(_local, "captured", None)


# --- Python warnings, log records and exceptions in C callbacks, per thread -------------------

_hooks_lock = threading.Lock()
_log_handler: logging.Handler | None = None


def _install_hooks() -> None:
    """Route warnings, Pillow's log records and unraisable exceptions of decoding threads to
    their decode; other threads' go where they went before. Checked at every decode: whoever
    replaced a hook since (a library, a test runner) is wrapped in turn, not undone."""
    global _log_handler
    with _hooks_lock:
        if not getattr(warnings.showwarning, "_mmrun_hook", False):
            warnings.showwarning = _wrap_showwarning(warnings.showwarning)
        if not getattr(sys.unraisablehook, "_mmrun_hook", False):
            sys.unraisablehook = _wrap_unraisablehook(sys.unraisablehook)
        if _log_handler is None:
            _log_handler = _DecodeLogHandler()
            logging.getLogger("PIL").addHandler(_log_handler)


def _wrap_showwarning(previous: Any) -> Any:
    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        sink = _sink()
        if sink is None:
            previous(message, category, filename, lineno, file, line)
        else:
            sink.lines.append(f"{category.__name__}: {message}")

    showwarning._mmrun_hook = True  # type: ignore[attr-defined]
    return showwarning


def _wrap_unraisablehook(previous: Any) -> Any:
    def unraisablehook(unraisable: Any) -> None:
        sink = _sink()
        if sink is None:
            previous(unraisable)
            return
        exc = unraisable.exc_value
        text = f"{type(exc).__name__}: {exc}" if exc is not None else "an internal error"
        sink.lines.append(f"{unraisable.err_msg or 'Exception ignored'}: {text}")
        sink.failure = sink.failure or text

    unraisablehook._mmrun_hook = True  # type: ignore[attr-defined]
    return unraisablehook


class _DecodeLogHandler(logging.Handler):
    """Pillow's log records (e.g. "More samples per pixel than can be decoded") from a decoding
    thread go to its decode. Records from other threads are printed as Python prints a record
    that no handler takes, unless a handler of the root logger takes them anyway."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        sink = _sink()
        if sink is not None:
            sink.lines.append(f"{record.name}: {record.getMessage()}")
        elif not logging.getLogger().handlers and logging.lastResort is not None:
            logging.lastResort.handle(record)


# --- C's stderr stream, shared by all decodes that run at once --------------------------------


class _CStderr:
    """Points C's ``stderr`` at a temporary file while at least one decode runs.

    The temporary file is opened once and never closed, so that C code that still holds the
    stream (another thread, mid-write) never writes to a closed one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._ready: bool | None = None
        self._libc: Any = None
        self._stderr: Any = None  # the C variable ``stderr``, as a ctypes c_void_p
        self._saved: int | None = None
        self._capture: int | None = None  # FILE * of the temporary file

    def _setup(self) -> bool:
        if self._ready is not None:
            return self._ready
        self._ready = False
        if sys.platform == "darwin":
            name = "__stderrp"
        elif sys.platform.startswith("linux") and _is_glibc():
            name = "stderr"
        else:
            return False
        try:
            libc = ctypes.CDLL(None)
            libc.tmpfile.restype = ctypes.c_void_p
            libc.tmpfile.argtypes = []
            libc.fflush.argtypes = [ctypes.c_void_p]
            libc.fileno.argtypes = [ctypes.c_void_p]
            libc.rewind.argtypes = [ctypes.c_void_p]
            variable = ctypes.c_void_p.in_dll(libc, name)
            capture = libc.tmpfile()
        except (OSError, AttributeError, ValueError):
            return False
        if not capture or not variable.value:
            return False
        self._libc, self._stderr, self._capture = libc, variable, capture
        self._ready = True
        return True

    def enter(self) -> None:
        with self._lock:
            if not self._setup():
                return
            if self._active == 0:
                self._libc.fflush(self._stderr.value)
                self._saved = self._stderr.value
                self._stderr.value = self._capture
            self._active += 1

    def after_fork_in_child(self) -> None:
        """A process forked while a decode ran in another thread (vLLM forks its engine core
        while mmrun's media workers decode): that decode does not exist in the child, so its
        C ``stderr`` goes back to the real one; otherwise what the child's C code writes
        (CUDA, NCCL, torch warnings and errors) would go to this process's temporary file."""
        self._lock = threading.Lock()
        if self._ready and self._active and self._saved is not None:
            self._stderr.value = self._saved
        self._active = 0

    def leave(self) -> str:
        """End one decode's share; the text written while the last one ran, when it ends."""
        with self._lock:
            if not self._ready or self._active == 0:
                return ""
            self._active -= 1
            if self._active:
                return ""
            self._stderr.value = self._saved
            self._libc.fflush(self._capture)
            fd = self._libc.fileno(self._capture)
            try:
                size = os.fstat(fd).st_size
                text = os.pread(fd, size, 0) if size else b""
                os.ftruncate(fd, 0)
            except OSError:
                text = b""
            self._libc.rewind(self._capture)
            return text.decode("utf-8", errors="replace")


def _is_glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


_c_stderr = _CStderr()
os.register_at_fork(after_in_child=_c_stderr.after_fork_in_child)


@contextmanager
def library_output() -> Iterator[Captured]:
    """Collect what the libraries print while the block decodes, in this thread."""
    _install_hooks()
    captured = Captured()
    outer = _sink()
    _local.captured = captured
    _c_stderr.enter()
    try:
        yield captured
    finally:
        c_text = _c_stderr.leave()
        _local.captured = outer
        # C lines cannot be told apart by thread: they belong to the decodes that ran at once,
        # and are counted with the last of them to end.
        captured.lines += [line for line in c_text.splitlines() if line.strip()]
        if outer is not None:
            outer.lines += captured.lines
        elif _show and captured.lines:
            sys.stderr.write("".join(f"{line}\n" for line in captured.lines))
            sys.stderr.flush()
