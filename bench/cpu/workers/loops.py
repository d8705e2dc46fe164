"""Figure 6, in one process: the engine loops a batch can use, on the same prompts.

argv[1]: a JSON config {"engine_args", "prompt", "sampling", "prompts", "per_prompt",
"rounds", "windows", "seed"}. One ``vllm.LLM`` and one ``AsyncLLM`` (both started here, each
with its own engine core process), then rounds; in each round every loop runs once, in an
order rotated from round to round, each on its own new images (vLLM's prefix cache would
otherwise serve a repeated image's tokens from the KV cache):

- ``one_call``: one ``LLM.generate`` call with every prompt (the baseline);
- ``windows_W``: ``LLM.generate`` calls of W prompts each, one after the other;
- ``async_W``: ``AsyncLLM.generate`` per prompt (asyncio), at most W in flight, final
  outputs only (``RequestOutputKind.FINAL_ONLY``, as ``LLM`` asks for);
- ``enqueue_W``: mmrun's own ``mmrun.engine.Engine`` (``LLM.enqueue`` one prompt at a time,
  results from ``llm_engine.step()``), driven like ``mmrun.runner.Runner.drive``: fill up to
  W in flight, poll, refill;
- ``varied-<loop>``: one_call and the loops at the first window again, with each prompt's
  max_tokens between 1 and 31 (mean 16) instead of the config's.

Every loop gets the same kind of prompt: the rendered text and 2 decoded 224x224 images, made
before its clock starts (the pixels of ``bench/cpu/assets.write_png_set``). Per loop: total
time, time to the first finished result, the most requests in flight, vLLM's token counts,
the CPU time this process and the engine's processes used (less sensitive than wall time to
other processes on the machine),
and the peak RSS of this process (the frontend) and of the engine's processes (engine core and
its worker, summed) while it ran (each peak reset before the loop by writing 5 to
/proc/PID/clear_refs). Prints one JSON line.
"""

import time

START = time.perf_counter()

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.sampling_params import RequestOutputKind  # noqa: E402
from vllm.v1.engine.async_llm import AsyncLLM  # noqa: E402

from mmrun.engine import Engine  # noqa: E402  (the loop under test)

SIZE = 224
IDLE_S = 1.5
VARIED = "varied-"


def images(count: int, seed: int) -> list[Any]:
    """``count`` distinct images, the pixels ``write_png_set`` writes (PNG is lossless)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        colour = rng.integers(0, 256, 3)
        noise = rng.integers(-40, 40, (SIZE, SIZE, 3))
        out.append(Image.fromarray((colour + noise).clip(0, 255).astype(np.uint8)))
    return out


def status_kib(pid: int | str, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else 0


def reset_peak(pid: int | str) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def trim() -> None:
    """Give freed memory back to the OS, so each loop's peak starts from what it holds."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def core_pids(client: Any) -> list[int]:
    """The engine's processes behind an LLMEngine's or AsyncLLM's engine-core client: the
    engine core and its children (on the CPU backend, a worker process that holds the model
    and the KV cache)."""
    import psutil

    manager = getattr(getattr(client, "resources", None), "engine_manager", None)
    pids = [p.pid for p in getattr(manager, "processes", None) or [] if p.pid]
    for pid in list(pids):
        pids += [c.pid for c in psutil.Process(pid).children(recursive=True)]
    return pids


def engine_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the engine's processes have used so far."""
    import psutil

    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


class Meter:
    """Clock, first result, in-flight high-water mark, token counts of one loop."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first: float | None = None
        self.results = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.max_in_flight = 0

    def finished(self, output: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.start
        self.results += 1
        self.prompt_tokens += len(output.prompt_token_ids or [])
        self.completion_tokens += len(output.outputs[0].token_ids)

    def in_flight(self, n: int) -> None:
        self.max_in_flight = max(self.max_in_flight, n)

    def done(self) -> dict[str, Any]:
        total = time.perf_counter() - self.start
        return {
            "s": total,
            "first_s": self.first if self.first is not None else total,
            "results": self.results,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "max_in_flight": self.max_in_flight,
        }


def one_call(llm: Any, prompts: list[dict], params: list[Any]) -> dict[str, Any]:
    meter = Meter()
    meter.in_flight(len(prompts))
    for output in llm.generate(prompts, sampling_params=params, use_tqdm=False):
        meter.finished(output)
    return meter.done()


def windows(llm: Any, prompts: list[dict], params: list[Any], window: int) -> dict[str, Any]:
    meter = Meter()
    for i in range(0, len(prompts), window):
        part = prompts[i : i + window]
        meter.in_flight(len(part))
        some = params[i : i + window]
        for output in llm.generate(part, sampling_params=some, use_tqdm=False):
            meter.finished(output)
    return meter.done()


def enqueue(llm: Any, prompts: list[dict], params: list[Any], window: int) -> dict[str, Any]:
    """Runner.drive's loop around mmrun.engine.Engine, without the media pipeline."""
    engine = Engine(llm)
    meter = Meter()
    todo = iter(zip(prompts, params, strict=True))
    in_flight: set[str] = set()
    finished: dict[str, Any] = {}
    # Engine.poll returns mmrun Completions; the token counts come from vLLM's outputs.
    original_step = llm.llm_engine.step

    def step() -> list[Any]:
        outputs = original_step()
        for output in outputs:
            if output.finished:
                finished[str(output.request_id)] = output
        return outputs

    llm.llm_engine.step = step
    try:
        while True:
            while len(in_flight) < window:
                item = next(todo, None)
                if item is None:
                    break
                prompt, one = item
                in_flight.add(engine.submit(prompt, one, None, chat=False, template=None))
            meter.in_flight(len(in_flight))
            if not in_flight:
                break
            for request_id, result in engine.poll():
                if isinstance(result, str):
                    raise RuntimeError(f"request {request_id} failed: {result}")
                in_flight.remove(request_id)
                meter.finished(finished.pop(request_id))
    finally:
        del llm.llm_engine.step
    return meter.done()


async def run_async(
    engine: Any, prompts: list[dict], params: list[Any], window: int, tag: str
) -> dict[str, Any]:
    meter = Meter()
    slots = asyncio.Semaphore(window)
    in_flight = [0]

    async def one(i: int, prompt: dict) -> None:
        try:
            final = None
            async for output in engine.generate(prompt, params[i], request_id=f"{tag}-{i}"):
                final = output
            assert final is not None and final.finished
            meter.finished(final)
        finally:
            in_flight[0] -= 1
            slots.release()

    tasks = []
    for i, prompt in enumerate(prompts):
        await slots.acquire()
        in_flight[0] += 1
        meter.in_flight(in_flight[0])
        tasks.append(asyncio.create_task(one(i, prompt)))
    await asyncio.gather(*tasks)
    return meter.done()


async def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    n, per = config["prompts"], config["per_prompt"]
    marks: dict[str, float] = {"imported": time.perf_counter() - START}

    def make_prompts(seed: int, count: int = n) -> list[dict]:
        pix = images(count * per, seed)
        return [
            {
                "prompt": config["prompt"],
                "multi_modal_data": {"image": pix[i * per : (i + 1) * per]},
            }
            for i in range(count)
        ]

    def sampling(varied: bool, final_only: bool) -> list[Any]:
        """One SamplingParams per prompt: all alike, or with output lengths 1..31 (mean 16)."""
        extra = {"output_kind": RequestOutputKind.FINAL_ONLY} if final_only else {}
        if not varied:
            return [SamplingParams(**config["sampling"], **extra)] * n
        return [
            SamplingParams(**{**config["sampling"], "max_tokens": 1 + (i * 37) % 31}, **extra)
            for i in range(n)
        ]

    params = sampling(varied=False, final_only=False)
    llm = LLM(**config["engine_args"])
    marks["llm_started"] = time.perf_counter() - START
    aengine = AsyncLLM.from_engine_args(AsyncEngineArgs(**config["engine_args"]))
    marks["async_started"] = time.perf_counter() - START
    cores = {
        "llm": core_pids(llm.llm_engine.engine_core),
        "async": core_pids(aengine.engine_core),
    }

    # Warm-up, untimed: one full window through each engine.
    warm = 2 * int(config["engine_args"].get("max_num_seqs", 1))
    llm.generate(make_prompts(config["seed"] - 1, warm), sampling_params=params[0], use_tqdm=False)
    await run_async(
        aengine,
        make_prompts(config["seed"] - 2, warm),
        sampling(False, True)[:1] * warm,
        warm,
        "warm",
    )
    marks["warmed"] = time.perf_counter() - START

    kinds: list[str] = ["one_call"]
    for w in config["windows"]:
        kinds += [f"windows_{w}", f"async_{w}", f"enqueue_{w}"]
    # The same loops (at the first window) with output lengths that differ from prompt to
    # prompt: a window of generate calls waits for its longest request.
    w = config["windows"][0]
    kinds += [f"{VARIED}{k}" for k in ("one_call", f"windows_{w}", f"async_{w}", f"enqueue_{w}")]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    rounds = config["rounds"]
    seed = config["seed"]
    for r in range(rounds):
        shift = (r * len(kinds)) // rounds
        order = kinds[shift:] + kinds[:shift]
        for kind in order:
            seed += 1
            prompts = make_prompts(seed)
            trim()
            # An engine's worker keeps polling for 1 s after its last step (vLLM's
            # SpinCondition, busy_loop_s): let the other engine's go idle first.
            await asyncio.sleep(IDLE_S)
            loop = kind.removeprefix(VARIED)
            varied = loop != kind
            engine_side = "async" if loop.startswith("async") else "llm"
            pids = [os.getpid(), *cores[engine_side]]
            reset_ok = all(reset_peak(p) for p in pids)
            rss_start = status_kib(os.getpid(), "VmRSS")
            load1 = os.getloadavg()[0]
            cpu_start = time.process_time(), engine_cpu(pids[1:])
            if loop == "one_call":
                result = one_call(llm, prompts, sampling(varied, False))
            else:
                name, w = loop.rsplit("_", 1)
                window = int(w)
                if name == "windows":
                    result = windows(llm, prompts, sampling(varied, False), window)
                elif name == "enqueue":
                    result = enqueue(llm, prompts, sampling(varied, False), window)
                else:
                    result = await run_async(
                        aengine, prompts, sampling(varied, True), window, f"r{seed}"
                    )
            cpu_end = time.process_time(), engine_cpu(pids[1:])
            result.update(
                {
                    "frontend_cpu_s": cpu_end[0] - cpu_start[0],
                    "engine_cpu_s": cpu_end[1] - cpu_start[1],
                    "round": r,
                    "position": order.index(kind),
                    "load1": load1,
                    "peak_reset": reset_ok,
                    "frontend_rss_start_mib": rss_start / 1024,
                    "frontend_peak_mib": status_kib(os.getpid(), "VmHWM") / 1024,
                    "engine_peak_mib": sum(status_kib(p, "VmHWM") for p in pids[1:]) / 1024,
                    "engine_processes": len(pids) - 1,
                }
            )
            if result["results"] != n:
                raise RuntimeError(f"{kind}: {result['results']} results of {n}")
            runs[kind].append(result)
            print(
                f"round {r + 1}/{rounds} {kind}: {result['s']:.2f} s, first "
                f"{result['first_s']:.2f} s, load {load1:.2f}",
                file=sys.stderr,
                flush=True,
            )
            del prompts
    print(json.dumps({"marks_s": marks, "kinds": kinds, "runs": runs}), flush=True)
    # Stop both engines now: their own stop waits seconds for nothing here.
    for pid in cores["llm"] + cores["async"]:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
