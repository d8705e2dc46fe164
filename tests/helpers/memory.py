"""The peak memory of a command, measured from a small launcher process.

A child's ``ru_maxrss`` counts the memory of the process it was forked from (Linux records
the parent's high-water mark when the child execs), so a command started from the test
process itself would report the test runner's size once earlier tests have grown it (vLLM
and torch imported by end-to-end tests). The launcher is a fresh, small Python process.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
sys.stderr.write(err.decode(errors="replace")[-2000:])
"""


def peak_rss(
    command: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 1800
) -> tuple[int, int, str]:
    """Run ``command``: its exit code, its peak resident memory in bytes, its stderr's end."""
    launcher = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command],
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        timeout=timeout,
    )
    code, kib = launcher.stdout.split()
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return int(code), int(kib) * scale, launcher.stderr
