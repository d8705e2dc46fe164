"""Run one command and timestamp everything it prints, for the GPU runs (no device needed).

Every line of the command's stdout and stderr is written to DIR/log.txt as
``<seconds since spawn> <O|E> <line>``; stdout alone also goes to DIR/stdout (a JSON document
to parse later). With ``--watch FILE``, each line appended to FILE (a batch's JSONL output) is
timed too. DIR/ttr.json then holds: spawn time (wall clock), exit code, seconds to exit, to
the first stdout byte, to the first stdout line matching ``--result`` (default: any), and to
the first and last watched line.

With ``--monitor S`` (or TTR_MONITOR=S), every S seconds the CPU time of each thread of every
process of the command's session (the command, vLLM's engine core, ...) and the host's busy
CPUs are read from /proc, from this process: nothing runs in the measured processes. They go
to DIR/monitor.jsonl, one line per sample: ``{"t": seconds since spawn, "host": [busy, total
jiffies], "cpus": the host's CPU count, "threads": {"pid/tid": [process name, thread name, CPU jiffies]}}``, a thread listed
when its CPU time changed since the previous sample (all of them in the first).
``cpu_in_window`` reads it back: each thread's CPU seconds between two times.

usage: ttr.py --dir DIR [--watch FILE] [--result REGEX] [--timeout S] [--monitor S] [--env K=V ...] -- CMD...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--watch")
    ap.add_argument("--result", default="")
    ap.add_argument("--timeout", type=float, default=0)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--monitor", type=float, default=float(os.environ.get("TTR_MONITOR") or 0))
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command")
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for pair in args.env:
        key, _, value = pair.partition("=")
        if value == "<unset>":
            env.pop(key, None)
        else:
            env[key] = value
    if args.watch:
        Path(args.watch).unlink(missing_ok=True)
    log = open(out / "log.txt", "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
    stdout_copy = open(out / "stdout", "wb")  # noqa: SIM115
    lock = threading.Lock()
    result_re = re.compile(args.result) if args.result else None
    marks: dict[str, float] = {}
    wall0 = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )

    def now() -> float:
        return time.perf_counter() - t0

    def reader(stream: object, tag: str) -> None:
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            t = now()
            if tag == "O":
                stdout_copy.write(raw)
                marks.setdefault("first_stdout_s", t)
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if (
                tag == "O"
                and "result_s" not in marks
                and (result_re is None or result_re.search(line))
            ):
                marks["result_s"] = t
            with lock:
                log.write(f"{t:9.3f} {tag} {line[:2000]}\n")

    threads = [
        threading.Thread(target=reader, args=(proc.stdout, "O"), daemon=True),
        threading.Thread(target=reader, args=(proc.stderr, "E"), daemon=True),
    ]
    for th in threads:
        th.start()
    lines: list[float] = []
    stop = threading.Event()

    def watcher() -> None:
        path = Path(args.watch)
        seen = 0
        while True:
            ended = stop.is_set()
            try:
                with open(path, "rb") as f:
                    f.seek(seen)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            if chunk:
                complete = chunk.rfind(b"\n") + 1
                t = now()
                lines.extend([t] * chunk[:complete].count(b"\n"))
                seen += complete
            if ended:
                return
            time.sleep(0.01)

    monitor_thread = None
    if args.monitor > 0:
        monitor_thread = threading.Thread(
            target=monitor,
            args=(proc.pid, out / "monitor.jsonl", args.monitor, now, stop),
            daemon=True,
        )
        monitor_thread.start()
    watch_thread = None
    if args.watch:
        watch_thread = threading.Thread(target=watcher, daemon=True)
        watch_thread.start()
    timed_out = False
    try:
        rc = proc.wait(timeout=args.timeout or None)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    exit_s = now()
    for th in threads:
        th.join(timeout=5)
    stop.set()
    if watch_thread is not None:
        watch_thread.join(timeout=5)
    if monitor_thread is not None:
        monitor_thread.join(timeout=5)
    with contextlib_suppress():
        os.killpg(proc.pid, signal.SIGKILL)  # anything the command left running
    record = {
        "cmd": cmd,
        "spawn_wall": wall0,
        "rc": rc,
        "timed_out": timed_out,
        "exit_s": round(exit_s, 3),
        **{k: round(v, 3) for k, v in marks.items()},
    }
    if args.watch:
        record.update(
            lines=len(lines),
            first_line_s=round(lines[0], 3) if lines else None,
            last_line_s=round(lines[-1], 3) if lines else None,
        )
        (out / "lines.txt").write_text("".join(f"{t:.3f}\n" for t in lines))
    (out / "ttr.json").write_text(json.dumps(record, indent=1))
    log.close()
    stdout_copy.close()
    return 0 if rc == 0 else 1


def _stat(path: str) -> tuple[str, list[str]] | None:
    """(name, the fields after it) of a /proc .../stat file; None when it is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return head.partition("(")[2], rest.split()


def _session_threads(session: int) -> dict[str, list]:
    """'pid/tid' -> [process name, thread name, utime + stime jiffies] for every thread of
    every process whose session is ``session`` (the command was started as its leader)."""
    found: dict[str, list] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        st = _stat(f"/proc/{pid}/stat")
        if st is None or len(st[1]) < 14 or st[1][3] != str(session):
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            th = _stat(f"/proc/{pid}/task/{tid}/stat")
            if th is not None and len(th[1]) >= 13:
                found[f"{pid}/{tid}"] = [st[0], th[0], int(th[1][11]) + int(th[1][12])]
    return found


def _host() -> list[int]:
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return [0, 0]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return [sum(v) - idle, sum(v)]


def monitor(session: int, path: Path, every: float, now, stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    last: dict[str, int] = {}
    cpus = os.cpu_count() or 1  # the host's, for reading the file back on another machine
    with open(path, "w") as f:
        while True:
            ended = stop.is_set()
            t = now()
            threads = _session_threads(session)
            changed = {k: v for k, v in threads.items() if last.get(k) != v[2]}
            last = {k: v[2] for k, v in threads.items()}
            rec = {"t": round(t, 3), "host": _host(), "cpus": cpus, "threads": changed}
            f.write(json.dumps(rec) + "\n")
            if ended:
                return
            stop.wait(every)


def cpu_in_window(path: Path, start: float, end: float) -> dict:
    """From DIR/monitor.jsonl: each thread's CPU seconds between ``start`` and ``end``
    (seconds since spawn, the nearest samples at or before each), and the host's busy CPUs
    on average then. {"threads": {"pid/tid": [process, thread, seconds]}, "host_busy_cpus",
    "span_s"} or {} when the file has no samples around the window."""
    tick = os.sysconf("SC_CLK_TCK")
    state: dict[str, list] = {}
    at_start: dict[str, list] | None = None
    host0 = host1 = None
    t0 = t1 = None
    cpus = os.cpu_count() or 1  # files written before the monitor recorded the host's count
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec["t"] > end and at_start is not None:
            break
        cpus = rec.get("cpus", cpus)
        for k, v in rec["threads"].items():
            state[k] = v
        if rec["t"] <= start or at_start is None:
            at_start = {k: list(v) for k, v in state.items()}
            host0, t0 = rec["host"], rec["t"]
        host1, t1 = rec["host"], rec["t"]
    if at_start is None or host0 is None or host1 is None or t1 is None or t1 <= (t0 or 0):
        return {}
    threads = {}
    for k, v in state.items():
        before = at_start.get(k, [v[0], v[1], 0])[2]
        if v[2] > before:
            threads[k] = [v[0], v[1], round((v[2] - before) / tick, 2)]
    total = host1[1] - host0[1]
    busy = (host1[0] - host0[0]) / total * cpus if total else None
    return {
        "threads": threads,
        "host_busy_cpus": None if busy is None else round(busy, 2),
        "span_s": round(t1 - (t0 or 0), 2),
    }


class contextlib_suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


if __name__ == "__main__":
    sys.exit(main())
