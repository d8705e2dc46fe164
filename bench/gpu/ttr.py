"""Run one command and timestamp everything it prints, for the GPU runs (no device needed).

Every line of the command's stdout and stderr is written to DIR/log.txt as
``<seconds since spawn> <O|E> <line>``; stdout alone also goes to DIR/stdout (a JSON document
to parse later). With ``--watch FILE``, each line appended to FILE (a batch's JSONL output) is
timed too. DIR/ttr.json then holds: spawn time (wall clock), exit code, seconds to exit, to
the first stdout byte, to the first stdout line matching ``--result`` (default: any), and to
the first and last watched line.

usage: ttr.py --dir DIR [--watch FILE] [--result REGEX] [--timeout S] [--env K=V ...] -- CMD...
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


class contextlib_suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


if __name__ == "__main__":
    sys.exit(main())
