"""vLLM's log stream, in mmrun's process and in every engine process vLLM starts.

vLLM reports why an engine failed to start in the process where it failed (the engine core
or a worker) and tells the process that asked only "Engine core initialization failed. See
root cause above." mmrun points vLLM's log stream here (``VLLM_LOGGING_STREAM=
ext://mmrun.engine.log_stream.STREAM``): each record goes to stderr as before, and, while
``MMRUN_ENGINE_LOG`` names a file, to that file as well, from whichever process logged it;
``root_cause`` reads the reason back out of it.

Imported by vLLM's logging set-up in freshly spawned engine processes: the standard library
only (mmrun.engine.output sets the file up and routes the rest of the engine's output).
"""

from __future__ import annotations

import os
import re
import sys
from typing import IO

ENV = "MMRUN_ENGINE_LOG"
STREAM_SPEC = "ext://mmrun.engine.log_stream.STREAM"
MAX_BYTES = 1 << 20  # per process: the reason for a failed start comes early


class _Tee:
    """A text stream for logging.StreamHandler: stderr, plus the file named by ``ENV``."""

    def __init__(self) -> None:
        self._file: IO[str] | None = None
        self._path: str | None = None
        self._written = 0

    def write(self, text: str) -> int:
        sys.stderr.write(text)
        path = os.environ.get(ENV)
        if path and self._written < MAX_BYTES and not _is_stderr(path):
            try:
                if self._file is None or self._path != path:
                    # Appends: several processes write to one file, a line at a time.
                    self._file = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
                    self._path = path
                self._file.write(text)
                self._file.flush()
                self._written += len(text)
            except OSError:  # the file is gone (the run is ending): stderr alone
                self._file = None
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return False


STREAM = _Tee()


def _is_stderr(path: str) -> bool:
    """Whether stderr already is the file at ``path`` (mmrun points the engine's output there
    without -v): the record is in it once."""
    try:
        here, there = os.fstat(2), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


# "(EngineCore pid=4803) ERROR 11-30 02:21:39 [core.py:1510] " before each line of a record
# (vLLM 0.32); vLLM 0.26 adds the process part outside the log stream, so it is optional.
_PREFIX = re.compile(
    r"^(?:\([^()]* pid=\d+\) )?(?:(?P<level>[A-Z]+) \d\d-\d\d [\d:]+ \[[^\]]*\] ?)?"
)
# The last line of a traceback: "ValueError: Available memory on node 0 ...".
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")
# What vLLM's processes say about a failure elsewhere: not the reason.
_WRAPPERS = (
    "Engine core initialization failed",
    "WorkerProc initialization failed",
    "See stack trace for root cause",
    "See root cause above",
)


def root_cause(log: str) -> str | None:
    """The first exception in ``log`` that is not vLLM saying that another process failed.
    Only from records logged as errors: with -v the log also holds warnings whose tracebacks
    were survived."""
    for raw in log.splitlines():
        prefix = _PREFIX.match(raw)
        level = prefix.group("level") if prefix else None
        if level not in (None, "ERROR", "CRITICAL"):
            continue
        line = raw[prefix.end() :].strip() if prefix else raw.strip()
        match = _EXCEPTION.match(line)
        if match and not any(wrapper in line for wrapper in _WRAPPERS):
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2)}"
    return None
