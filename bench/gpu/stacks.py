"""Run a module as `python -m MODULE ARGS` would, while sampling, every 100 ms, the Python
stack of each of its threads and the CPU time of each of the process's threads (/proc), to
show what a process does when the GPU waits. Forked children (vLLM's engine core) do not
inherit the sampler.

usage: stacks.py OUT -m MODULE [ARGS...]
  OUT: one line per sample, {"t": wall-clock time, "cpu": {thread: CPU seconds since the last
  sample, where more than none}, "stacks": {thread: stack id}, "new": {stack id: the stack,
  innermost frame first, for the ids first seen}}.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path

PERIOD_S = 0.1
DEPTH = 14
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each OS thread of this process, by "name/tid"."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rpartition(")")[2].split()
        out[f"{name}/{task.name}"] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def sample(out: Path, stop: threading.Event) -> None:
    me = threading.get_ident()
    table: dict[tuple[str, ...], int] = {}
    before = thread_cpu()
    with out.open("w") as f:
        while not stop.wait(PERIOD_S):
            names = {t.ident: f"{t.name}/{t.native_id}" for t in threading.enumerate()}
            stacks, new = {}, {}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                frames = []
                while frame is not None and len(frames) < DEPTH:
                    code = frame.f_code
                    where = code.co_filename.rsplit("/", 2)
                    frames.append(f"{code.co_name} {'/'.join(where[-2:])}:{frame.f_lineno}")
                    frame = frame.f_back
                key = tuple(frames)
                if key not in table:
                    table[key] = len(table)
                    new[table[key]] = frames
                stacks[names.get(ident, str(ident))] = table[key]
            now = thread_cpu()
            cpu = {k: round(v - before.get(k, 0.0), 2) for k, v in now.items()}
            before = now
            busy = {k: v for k, v in cpu.items() if v > 0}
            line = {"t": round(time.time(), 3), "cpu": busy, "stacks": stacks, "new": new}
            f.write(json.dumps(line) + "\n")
            f.flush()


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit(__doc__)
    out, module = Path(sys.argv[1]), sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(out, stop), name="stacks", daemon=True)
    sampler.start()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        stop.set()
        sampler.join(5)


if __name__ == "__main__":
    main()
