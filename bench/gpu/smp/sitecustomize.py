"""A wall-clock stack sampler for every Python process of a benchmark run (diagnosis only).

Put this folder first on PYTHONPATH and set MMSAMPLE_DIR: every Python process started with it
(mmrun's frontend, raw_bench.py, vLLM's engine core, whether forked or spawned) samples the
stacks of all its threads every MMSAMPLE_MS milliseconds (20) and appends them, once a second,
to MMSAMPLE_DIR/<pid>.smp as tab-separated lines:

    wall second (int)  thread name  frames root->leaf ("file:function:line", ';'-joined)  count

Appending once a second keeps what was sampled when the process is killed (vLLM's engine core
is; mmrun ends with os._exit). A header line ``# pid ppid argv`` names the process. Threads
waiting in C (a GPU sync, a lock, a socket) show the Python frame that called in. No effect
without MMSAMPLE_DIR. bench/gpu/smp.py summarises the files.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter

_DIR = os.environ.get("MMSAMPLE_DIR")


def _frames(frame, depth: int = 80) -> str:  # type: ignore[no-untyped-def]
    parts = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return ";".join(reversed(parts))


def _sample_forever(path: str, interval: float) -> None:
    me = threading.get_ident()
    counts: Counter[tuple[int, str, str]] = Counter()
    with open(path, "a") as out:
        argv = " ".join(sys.argv)[:300].replace("\n", " ")
        out.write(f"# {os.getpid()} {os.getppid()} {argv}\n")
        out.flush()
        last_flush = time.time()
        while True:
            time.sleep(interval)
            now = time.time()
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    counts[(int(now), names.get(ident, str(ident)), _frames(frame))] += 1
            if now - last_flush >= 1.0:
                for (sec, name, stack), n in counts.items():
                    out.write(f"{sec}\t{name}\t{stack}\t{n}\n")
                out.flush()
                counts.clear()
                last_flush = now


def _start() -> None:
    if not _DIR:
        return
    os.makedirs(_DIR, exist_ok=True)
    interval = float(os.environ.get("MMSAMPLE_MS", "20")) / 1000
    path = os.path.join(_DIR, f"{os.getpid()}.smp")
    threading.Thread(
        target=_sample_forever, args=(path, interval), name="mmsample", daemon=True
    ).start()


if _DIR:
    _start()
    os.register_at_fork(after_in_child=_start)  # a forked child has no copy of the thread
