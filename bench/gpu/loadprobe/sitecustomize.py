"""What the engine core does while it loads vLLM's AOT compile cache (diagnosis for issue 16.1).

vLLM logs that load as "Dynamo bytecode transform time": 1.9 s in the raw script against 3.7 s
in mmrun on the H200 (2026-12-01), every pair, same cache. This probe says whether the extra
time is work (CPU time grows with it), waiting (it does not), garbage collection (the
collector's own time), contention (involuntary context switches) or page faults.

Put this folder first on PYTHONPATH and set MMLOAD_DIR. In every process that calls
``vllm.compilation.decorators._try_load_aot_compiled_fn``, one JSON line per call is appended
to MMLOAD_DIR/<pid>.jsonl:

    wall_s, cpu_s (the calling thread), proc_cpu_s (the process)   the whole load
    unpickle_s   torch.compiler.load_compiled_function            verify_s   the source check
    backend_at_s when vLLM's backend was first called (where vLLM logs its "Dynamo" time)
    gc           {generation: [collections, seconds]} during the load
    rusage       the thread's minor/major faults, voluntary/involuntary switches, during it
    objects, frozen, threads, cores, omp, torch_threads, loadavg, forked   the process then
    speed_before_s, speed_after_s   a fixed pure-Python workload (allocation, calls, pickle),
                 run right before and right after the load (not with MMLOAD_SPEED=0: it also
                 changes the collector's state that the load starts from); slower in one
                 variant's engine core than in another's means its CPU is slower then
                 (contention, frequency, memory), not that its load does more work
    parent_cpu_s the CPU seconds of the process that started this one (the frontend), all its
                 threads, during the load; busy_cpus: the host's busy CPUs during it (/proc/stat)
    gc_at_start  the collector's counts, thresholds and frozen objects as the load starts
    cpu_at       [start, end] the CPU this thread ran on; anon_huge_kb: the process's
                 transparent huge pages after it; thp: the host's setting

No effect without MMLOAD_DIR; gap.py's summary reads the files (GAP_PROBE=load).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import threading
import time

_DIR = os.environ.get("MMLOAD_DIR")
_MODULE = "vllm.compilation.decorators"
_GC = {"start": 0.0, "totals": {}}
_STATE = {"forked": False, "backend_at": None}


def _gc_callback(phase: str, info: dict) -> None:
    if phase == "start":
        _GC["start"] = time.perf_counter()
        return
    gen = info.get("generation", -1)
    n, s = _GC["totals"].get(gen, (0, 0.0))
    _GC["totals"][gen] = (n + 1, s + time.perf_counter() - _GC["start"])


def _usage() -> tuple[int, int, int, int]:
    import resource

    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    u = resource.getrusage(who)
    return (u.ru_minflt, u.ru_majflt, u.ru_nvcsw, u.ru_nivcsw)


_SPEED_BLOB: list = []


def _speed() -> float:
    """Seconds of one fixed pure-Python workload (~0.2-0.4 s on a fast core)."""
    import pickle

    if not _SPEED_BLOB:
        _SPEED_BLOB.append(
            pickle.dumps([{"k": i, "v": (i, str(i), [i] * 3)} for i in range(60000)])
        )
    t = time.perf_counter()
    for _ in range(3):
        rows = pickle.loads(_SPEED_BLOB[0])
        total = 0
        for row in rows:
            total += len(row["v"][1]) + row["k"] % 7
        del rows
    return round(time.perf_counter() - t, 4)


def _proc_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _host_jiffies() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v) - idle, sum(v)
    except (OSError, ValueError):
        return None


def _cpu_now() -> int | None:
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _read(path: str, key: str = "") -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if not key:
                    return line.strip()
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _timed(fn, key: str, into: dict):  # type: ignore[no-untyped-def]
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            into[key] = into.get(key, 0.0) + time.perf_counter() - t

    return wrapper


def _write(rec: dict) -> None:
    os.makedirs(_DIR, exist_ok=True)  # type: ignore[arg-type]
    with open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a") as f:  # type: ignore[arg-type]
        f.write(json.dumps(rec) + "\n")


def _process_facts() -> dict:
    facts: dict = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "forked": _STATE["forked"],
        "threads": threading.active_count(),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "loadavg": os.getloadavg()[0],
    }
    try:
        facts["cores"] = len(os.sched_getaffinity(0))
    except Exception:
        facts["cores"] = None
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            facts["torch_threads"] = torch.get_num_threads()
    return facts


def _wrap_load(orig):  # type: ignore[no-untyped-def]
    def load(*args, **kwargs):  # type: ignore[no-untyped-def]
        import torch

        parts: dict = {}
        load_fn = torch.compiler.load_compiled_function
        torch.compiler.load_compiled_function = _timed(load_fn, "unpickle_s", parts)
        mod = sys.modules[_MODULE]
        verify = getattr(mod, "_verify_source_unchanged", None)
        if verify is not None:
            mod._verify_source_unchanged = _timed(verify, "verify_s", parts)
        speed = os.environ.get("MMLOAD_SPEED", "1") != "0"
        speed_before = _speed() if speed else None
        gc_at_start = {
            "count": gc.get_count(),
            "threshold": gc.get_threshold(),
            "frozen": gc.get_freeze_count(),
            "collections": [g["collections"] for g in gc.get_stats()],
        }
        ppid = os.getppid()
        parent0, host0, cpu0 = _proc_cpu_s(ppid), _host_jiffies(), _cpu_now()
        gc_before = dict(_GC["totals"])
        use0 = _usage()
        _STATE["backend_at"] = None
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        try:
            return orig(*args, **kwargs)
        finally:
            wall = time.perf_counter() - t0
            cpu, proc = time.thread_time() - c0, time.process_time() - p0
            use1 = _usage()
            parent1, host1, cpu1 = _proc_cpu_s(ppid), _host_jiffies(), _cpu_now()
            torch.compiler.load_compiled_function = load_fn
            if verify is not None:
                mod._verify_source_unchanged = verify
            gcd = {}
            for gen, (n, s) in _GC["totals"].items():
                n0, s0 = gc_before.get(gen, (0, 0.0))
                if n > n0:
                    gcd[str(gen)] = [n - n0, round(s - s0, 4)]
            at = _STATE["backend_at"]
            rec = {
                "wall_s": round(wall, 4),
                "cpu_s": round(cpu, 4),
                "proc_cpu_s": round(proc, 4),
                **{k: round(v, 4) for k, v in parts.items()},
                "backend_at_s": None if at is None else round(at - t0, 4),
                "gc": gcd,
                "rusage": {
                    k: b - a
                    for k, a, b in zip(
                        ("minflt", "majflt", "nvcsw", "nivcsw"), use0, use1, strict=True
                    )
                },
                "speed_before_s": speed_before,
                "gc_at_start": gc_at_start,
                "parent_cpu_s": (
                    None if parent0 is None or parent1 is None else round(parent1 - parent0, 2)
                ),
                "busy_cpus": (
                    None
                    if not host0 or not host1 or host1[1] == host0[1]
                    else round(
                        (host1[0] - host0[0]) / (host1[1] - host0[1]) * (os.cpu_count() or 1), 2
                    )
                ),
                "cpu_at": [cpu0, cpu1],
                "anon_huge_kb": _read("/proc/self/smaps_rollup", "AnonHugePages"),
                "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
                "objects": len(gc.get_objects()),
                "frozen": gc.get_freeze_count(),
                **_process_facts(),
            }
            rec["speed_after_s"] = _speed() if speed else None
            try:
                _write(rec)
            except Exception as exc:
                sys.stderr.write(f"mmload: not written: {exc!r}\n")

    load._mmload = True  # type: ignore[attr-defined]
    return load


def _patch_backend() -> None:
    mod = sys.modules.get("vllm.compilation.backends")
    cls = getattr(mod, "VllmBackend", None) if mod else None
    if cls is None or cls.__dict__.get("_mmload"):
        return
    cls._mmload = True
    call = cls.__call__

    def first_call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if _STATE["backend_at"] is None:
            _STATE["backend_at"] = time.perf_counter()
        return call(self, *args, **kwargs)

    cls.__call__ = first_call


def _watch() -> None:
    deadline = time.time() + 900
    while time.time() < deadline:
        mod = sys.modules.get(_MODULE)
        fn = getattr(mod, "_try_load_aot_compiled_fn", None) if mod else None
        if fn is not None:
            if not getattr(fn, "_mmload", False):
                mod._try_load_aot_compiled_fn = _wrap_load(fn)
            _patch_backend()
            if getattr(sys.modules.get("vllm.compilation.backends"), "VllmBackend", None):
                return
        time.sleep(0.02)


def _start() -> None:
    threading.Thread(target=_watch, name="mmload", daemon=True).start()


def _after_fork() -> None:
    _STATE["forked"] = True
    _start()  # the parent's watcher thread is not in the child


# Which parts run (for telling apart what the probe's presence changes: the tenth GPU session
# found mmrun's load as fast as raw's with this probe, twice as slow without it): "gc" the
# collector's callback, "wrap" the watcher threads and the wrapped load; "none" neither (this
# file is then only imported, in place of any other sitecustomize).
_PARTS = set(os.environ.get("MMLOAD_PARTS", "gc,wrap").split(","))

if _DIR:
    if "gc" in _PARTS:
        gc.callbacks.append(_gc_callback)
    if "wrap" in _PARTS:
        _start()
        os.register_at_fork(after_in_child=_after_fork)
