"""Run mmrun's CLI unchanged and note what it asks of vLLM, and when.

argv[1]: the JSON file to write; argv[2:]: mmrun's arguments. The file holds:
- "calls": each ``LLM`` entry point mmrun called (``enqueue``, ``enqueue_chat``, ``generate``,
  ``chat``) with its number of prompts, consecutive calls of the same kind and size merged
  ({"method", "prompts", "times"});
- "steps": how many engine steps (``llm_engine.step()``) it ran;
- "engine_ready": ``time.monotonic()`` when ``mmrun.engine.start`` returned (the system-wide
  clock: the benchmark compares it with its own);
- for a batch (``mmrun.runner.run_engine_batch``) or a named run (``run_named``), once it returns
  (the engine still running): "returned_at" (monotonic), "timings" (mmrun's own, which the CLI
  prints only for a named run), "done"/"failed" for a batch, "frontend_peak_mib" (this
  process's peak RSS, VmHWM in /proc: ``ru_maxrss`` would also count the memory of the process
  it was spawned from, up to its exec) and "engine_peak_mib" (the same, summed over the
  engine's processes: the engine core and its worker);
- "cpu_at_ready" and "cpu_at_end": CPU seconds (user + system) this process ("frontend")
  and the engine's processes ("engine") had used when the engine was ready and when the
  batch returned (their difference: what the batch cost in CPU, which other processes on
  the machine change less than wall time).

The patches go on right after mmrun has started the engine (and on the runner's functions
before the CLI imports them), so nothing is imported earlier than in a plain run. The file is
rewritten at each event: mmrun ends its process with ``os._exit``.
"""

import json
import os
import sys
import time


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    from mmrun import engine, runner

    record: dict = {"calls": [], "steps": 0}

    def save() -> None:
        with open(out, "w") as f:
            json.dump(record, f)

    def note(method: str, prompts: object) -> None:
        count = len(prompts) if isinstance(prompts, list) else 1
        calls = record["calls"]
        if calls and calls[-1]["method"] == method and calls[-1]["prompts"] == count:
            calls[-1]["times"] += 1
        else:
            calls.append({"method": method, "prompts": count, "times": 1})

    start = engine.start
    engine_pids: list[int] = []

    def cpu() -> dict[str, float]:
        import psutil  # a dependency of vLLM

        total = 0.0
        for pid in engine_pids:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        own = os.times()
        return {"frontend": own.user + own.system, "engine": total}

    def counting_start(engine_args, **kwargs):  # type: ignore[no-untyped-def]
        llm = start(engine_args, **kwargs)
        record["engine_ready"] = time.monotonic()
        cls = type(llm)
        for name in ("enqueue", "enqueue_chat", "generate", "chat"):
            original = getattr(cls, name, None)
            if original is None:
                continue

            def wrapper(self, prompts, *a, _original=original, _name=name, **k):  # type: ignore[no-untyped-def]
                note(_name, prompts)
                return _original(self, prompts, *a, **k)

            setattr(cls, name, wrapper)
        llm_engine = getattr(llm, "llm_engine", None)
        if llm_engine is not None:
            step = llm_engine.step

            def counting_step():  # type: ignore[no-untyped-def]
                record["steps"] += 1
                return step()

            llm_engine.step = counting_step
            core = getattr(llm_engine, "engine_core", None)
            manager = getattr(getattr(core, "resources", None), "engine_manager", None)
            engine_pids.extend(p.pid for p in getattr(manager, "processes", None) or [] if p.pid)
            import psutil  # a dependency of vLLM

            for pid in list(engine_pids):  # and its children: on the CPU backend, the worker
                engine_pids.extend(c.pid for c in psutil.Process(pid).children(recursive=True))
        record["cpu_at_ready"] = cpu()
        save()
        return llm

    def peak_kib(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def finished(stats_or_result: object) -> None:
        record["returned_at"] = time.monotonic()
        record["cpu_at_end"] = cpu()
        record["timings"] = dict(getattr(stats_or_result, "timings", None) or {})
        for key in ("done", "failed"):
            if hasattr(stats_or_result, key):
                record[key] = getattr(stats_or_result, key)
        record["frontend_peak_mib"] = peak_kib(os.getpid()) / 1024
        record["engine_peak_mib"] = sum(peak_kib(p) for p in engine_pids) / 1024
        save()

    run_batch, run_named = runner.run_engine_batch, runner.run_named

    def probed_batch(*a, **k):  # type: ignore[no-untyped-def]
        stats, handle = run_batch(*a, **k)
        finished(stats)
        return stats, handle

    def probed_named(*a, **k):  # type: ignore[no-untyped-def]
        result, handle = run_named(*a, **k)
        finished(result)
        return result, handle

    engine.start = counting_start
    runner.run_engine_batch = probed_batch
    runner.run_named = probed_named
    from mmrun.cli.main import main as mmrun_main

    sys.argv = ["mmrun", *args]
    save()  # no call yet
    mmrun_main()


if __name__ == "__main__":
    main()
