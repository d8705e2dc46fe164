"""Figure 7's baseline: every prompt in ONE ``LLM.generate`` call, as a plain script would.

Import vLLM (module top), read and decode every image file (Pillow), start ``vllm.LLM``, one
``generate`` call with all the prompts. argv[1]: a JSON config {"engine_args", "prompt",
"sampling", "files": [[path, ...], ...]}. Prints one JSON line: the phases (seconds since
this process started, and ``time.monotonic()`` when the call returned), the call's own time,
vLLM's token counts, the CPU seconds (user + system) this process and the engine's processes
used during the call, and the peak RSS of this process and of the engine's processes (engine
core and its worker, summed; VmHWM in /proc, read before the engine stops). Then kills the
engine's processes and exits at once.
"""

import time

START = time.perf_counter()

import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from PIL import Image  # noqa: E402  (a script imports at the top)
from vllm import LLM, SamplingParams  # noqa: E402


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    marks = {"imported": time.perf_counter() - START}
    prompts = [
        {
            "prompt": config["prompt"],
            "multi_modal_data": {"image": [Image.open(p).convert("RGB") for p in files]},
        }
        for files in config["files"]
    ]
    marks["decoded"] = time.perf_counter() - START
    llm = LLM(**config["engine_args"])
    marks["engine_started"] = time.perf_counter() - START
    import psutil  # a dependency of vLLM

    manager = getattr(
        getattr(llm.llm_engine.engine_core, "resources", None), "engine_manager", None
    )
    cores = [p.pid for p in getattr(manager, "processes", None) or [] if p.pid]
    for pid in list(cores):  # and its children: on the CPU backend, the worker
        cores += [c.pid for c in psutil.Process(pid).children(recursive=True)]

    def cpu() -> tuple[float, float]:
        own = os.times()
        engine = 0.0
        for pid in cores:
            times = psutil.Process(pid).cpu_times()
            engine += times.user + times.system
        return own.user + own.system, engine

    params = SamplingParams(**config["sampling"])
    cpu_start = cpu()
    t = time.perf_counter()
    outputs = llm.generate(prompts, sampling_params=params, use_tqdm=False)
    generate_s = time.perf_counter() - t
    returned_at = time.monotonic()
    cpu_end = cpu()
    marks["generated"] = time.perf_counter() - START
    print(
        json.dumps(
            {
                "phases_s": marks,
                "returned_at": returned_at,
                "generate_s": generate_s,
                "frontend_cpu_s": cpu_end[0] - cpu_start[0],
                "engine_cpu_s": cpu_end[1] - cpu_start[1],
                "prompts": len(outputs),
                "prompt_tokens": sum(len(o.prompt_token_ids or []) for o in outputs),
                "completion_tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
                "frontend_peak_mib": peak_mib(os.getpid()),
                "engine_peak_mib": sum(peak_mib(p) for p in cores),
                "engine_processes": len(cores),
            }
        ),
        flush=True,
    )
    for pid in cores:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    os._exit(0)


if __name__ == "__main__":
    main()
