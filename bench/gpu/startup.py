"""Start-up timelines: where each run's time went from spawn to its engine ready and on to its
results, read from throughput.py's run folders (run with --probe: start_probe.py's marks and
vLLM's own log lines, each timed on arrival, in seconds from spawn).

usage: startup.py RES [RES ...] [--json FILE] [--md FILE]
  RES: a throughput.py result folder (summary.json, and each run's log.txt in its folder).
Prints three tables (markdown): the runs (spawn to ready, to the first and to all results, the
texts' digest); then one column per run, the steps, each at its time from spawn and (+ seconds
since the step before it on the main line; "beside": a step in another thread, or inside
another step); and vLLM's own figures (model loading, Dynamo, the compile cache's hit or miss
and key, torch.compile, KV cache, CUDA graphs, init engine).
--json: the timelines, one per run; --md: the tables.

The vLLM lines are those of vLLM 0.26.0 (vllm/v1/engine/core.py, v1/worker/gpu_model_runner.py,
v1/worker/gpu_worker.py, v1/core/kv_cache_utils.py, compilation/backends.py and monitor.py,
config/model.py, utils/jit_monitor.py); vLLM 0.32 writes the same messages, with its own
process prefix on the line.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# throughput.py's log.txt: "  12.34 <the line as the process wrote it>"
LOG_LINE = re.compile(r"^\s*(?P<t>-?\d+(?:\.\d+)?) (?P<text>.*)$")
MARK = re.compile(r"STARTUP_MARK (?P<epoch>\d+(?:\.\d+)?) (?P<pid>\d+) (?P<event>.+?)\s*$")
# A vLLM log record: "[(EngineCore pid=N) ]INFO 12-02 10:11:12 [core.py:117] message"
RECORD = re.compile(
    r"^(?:\([^()]* pid=\d+\) )?(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]*\] )?(?P<message>.*)$"
)
NUMBER = r"(\d+(?:\.\d+)?)"

# Steps in the order a start goes through them: (key, label, where it comes from). A mark's
# event ("import vllm.entrypoints.llm begins"), or a pattern searched in the line (its
# groups: the figures vLLM reports, named in FIGURES).
STEPS: list[tuple[str, str, str | re.Pattern[str]]] = [
    ("python", "Python up (start_probe)", "interpreter up"),
    ("mmrun_imported", "import mmrun done", "import mmrun done"),
    ("mmrun_plugins", "mmrun plugins loaded", "mmrun plugins done"),
    ("mmrun_cli", "mmrun CLI imported", "import mmrun.cli.main done"),
    ("mmrun_choices", "mmrun: its GPU choices printed", re.compile(r"mmrun: for this GPU run")),
    ("mmrun_start", "mmrun planned: engine start begins", "mmrun engine start begins"),
    ("vllm_package", "import vllm begins", "import vllm begins"),
    ("vllm_package_done", "import vllm done", "import vllm done"),
    ("vllm_import", "import vllm (LLM) begins", "import vllm.entrypoints.llm begins"),
    ("torch_imported", "import torch done", "import torch done"),
    ("transformers_imported", "import transformers done", "import transformers done"),
    ("vllm_imported", "import vllm (LLM) done", "import vllm.entrypoints.llm done"),
    ("vllm_plugins", "vLLM plugins loaded", "vLLM plugins done"),
    ("llm_called", "LLM(...) called", "LLM() begins"),
    ("args", "vLLM: LLM's arguments line", re.compile(r"non-default args: ")),
    ("architecture", "vLLM: architecture resolved", re.compile(r"Resolved architecture: (\S+)")),
    ("engine_core", "vLLM: engine core's config line",
     re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config")),
    ("warm_begins", "mmrun frontend warm begins", "mmrun frontend warm begins"),
    ("warm_done", "mmrun frontend warm done", "mmrun frontend warm done"),
    ("model_load", "vLLM: model load begins", re.compile(r"Starting to load model")),
    ("model_loaded", "vLLM: model loaded",
     re.compile(rf"Model loading took {NUMBER} GiB(?: memory)? and {NUMBER} seconds")),
    ("encoder_profile", "vLLM: encoder profiling",
     re.compile(r"Encoder cache will be initialized with a budget of (\d+) tokens")),
    ("cache_dir", "vLLM: compile cache opened",
     re.compile(r"Using cache directory: (\S+) for vLLM's torch\.compile")),
    ("dynamo", "vLLM: Dynamo done", re.compile(rf"Dynamo bytecode transform time: {NUMBER} s")),
    ("graphs_loaded", "vLLM: compiled graphs loaded (cache hit)",
     re.compile(rf"Directly load the compiled graph\(s\) for compile range (.+?) from the "
                rf"cache, took {NUMBER} s")),
    ("graphs_compiled", "vLLM: graphs compiled (cache miss)",
     re.compile(rf"Compiling a graph for compile range (.+?) takes {NUMBER} s")),
    ("compiled", "vLLM: torch.compile done",
     re.compile(rf"torch\.compile (?:and initial profiling/warmup run together )?took "
                rf"{NUMBER} s in total")),
    ("kv_memory", "vLLM: KV cache memory known",
     re.compile(rf"Available KV cache memory: {NUMBER} GiB")),
    ("kv_size", "vLLM: KV cache sized", re.compile(r"(?:[GC]PU )?KV cache size: ([\d,]+) tokens")),
    ("captured", "vLLM: CUDA graphs captured",
     re.compile(rf"Graph capturing finished in {NUMBER} secs, took (-?\d+(?:\.\d+)?) GiB")),
    # vLLM's kernel warm-up after the capture (the V2 model runner's compiles Triton kernels)
    ("kernels_warm", "vLLM: kernels warmed up (JIT monitor on)",
     re.compile(r"Kernel JIT monitor activated")),
    ("ready", "vLLM: engine ready (init engine ... took)",
     re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {NUMBER} s")),
    ("llm_returned", "LLM(...) returned", "LLM() done"),
    ("first_request", "first request to the engine", "first request begins"),
    ("first_result", "first result", ""),
    ("last_result", "all results", ""),
]  # fmt: skip
# Steps that run beside the main line (in another thread, or inside another step): shown at
# their time, not counted as a step of the main line.
BESIDE = {"mmrun_choices", "torch_imported", "transformers_imported", "vllm_plugins",
          "warm_begins", "warm_done", "architecture", "cache_dir", "encoder_profile"}  # fmt: skip
# The figures vLLM reports on some lines: (step, group) -> figure.
FIGURES = {
    ("engine_core", 1): "vllm_version",
    ("model_loaded", 1): "model_gib",
    ("model_loaded", 2): "model_load_s",
    ("cache_dir", 1): "compile_cache_dir",
    ("dynamo", 1): "dynamo_s",
    ("graphs_loaded", 2): "graphs_load_s",
    ("graphs_compiled", 2): "graphs_compile_s",
    ("compiled", 1): "torch_compile_s",
    ("kv_memory", 1): "kv_cache_gib",
    ("kv_size", 1): "kv_cache_tokens",
    ("captured", 1): "cuda_graphs_s",
    ("captured", 2): "cuda_graphs_gib",
    ("ready", 1): "init_engine_s",
}
COMPILATION = re.compile(rf"\(compilation: {NUMBER} s(?:.*?encoder: {NUMBER} s)?")


def parse_log(text: str) -> tuple[dict[str, float], dict[str, object]]:
    """A run's log.txt: the time from spawn of each step's first occurrence, and vLLM's
    figures. A mark of another process (a forked engine core) than the first mark's is not a
    step of the main line and is left out."""
    steps: dict[str, float] = {}
    figures: dict[str, object] = {}
    main_pid = None
    for raw in text.split("\n"):  # (a progress bar's updates end in "\r", not in a new line)
        line = LOG_LINE.match(raw)
        if line is None:
            continue
        t, body = float(line["t"]), line["text"]
        mark = MARK.search(body)
        if mark is not None:
            main_pid = main_pid or mark["pid"]
            if mark["pid"] == main_pid:
                _mark_step(mark["event"], t, steps)
            continue
        if body.startswith("RAW_READY"):  # raw_vllm.py's own line, once LLM(...) returned
            steps.setdefault("llm_returned", t)
        message = RECORD.match(body.rsplit("\r", 1)[-1])
        _log_step(message["message"] if message else body, t, steps, figures)
    if figures.get("compile_cache_dir"):
        figures["compile_cache_key"] = cache_key(str(figures["compile_cache_dir"]))
    figures["compile_cache"] = (
        "miss" if "graphs_compiled" in steps else "hit" if "graphs_loaded" in steps else None
    )
    return steps, figures


def _mark_step(event: str, t: float, steps: dict[str, float]) -> None:
    for key, _, source in STEPS:
        if isinstance(source, str) and source and source == event:
            steps.setdefault(key, t)


def _log_step(message: str, t: float, steps: dict[str, float], figures: dict) -> None:
    for key, _, source in STEPS:
        if isinstance(source, str):
            continue
        found = source.search(message)
        if found is None or key in steps:
            continue
        steps[key] = t
        for (step, group), name in FIGURES.items():
            if step == key and found.group(group) is not None:
                figures[name] = _number(found.group(group))
        if key == "ready" and (compilation := COMPILATION.search(message)):
            figures["compilation_s"] = float(compilation.group(1))
            if compilation.group(2) is not None:
                figures["encoder_compile_s"] = float(compilation.group(2))


def _number(text: str) -> object:
    try:
        return float(text.replace(",", "")) if "." in text else int(text.replace(",", ""))
    except ValueError:
        return text


def cache_key(directory: str) -> str:
    """The hash part of vLLM's compile cache folder (.../torch_compile_cache/KEY/rank_0_0/
    backbone): two runs with the same key share their compiled graphs."""
    parts = Path(directory).parts
    if "torch_compile_cache" in parts:
        rest = parts[parts.index("torch_compile_cache") + 1 :]
        if rest:
            return rest[0][:10]
    return directory


def timeline(row: dict, log: str) -> dict:
    """One run's timeline: its summary row's results and its log's steps and figures."""
    steps, figures = parse_log(log)
    if row.get("spawn_to_first_s") is not None:
        steps["first_result"] = row["spawn_to_first_s"]
    if row.get("spawn_to_last_s") is not None:
        steps["last_result"] = row["spawn_to_last_s"]
        steps.setdefault("first_result", row["spawn_to_last_s"])  # the script's: all at once
    order = [key for key, _, _ in STEPS]
    main = sorted((t, order.index(k)) for k, t in steps.items() if k not in BESIDE)
    since = {}
    for i, (t, index) in enumerate(main):
        since[order[index]] = round(t - main[i - 1][0], 2) if i else round(t, 2)
    return {
        "run": row.get("run"),
        "variant": row.get("variant"),
        "prompts": row.get("prompts"),
        "results": {k: row[k] for k in RESULTS if k in row},
        "steps": {k: {"t": round(steps[k], 2), "since_previous": since.get(k)}
                  for k in order if k in steps},
        "vllm": figures,
    }  # fmt: skip


# What throughput.py's summary row says of the run as a whole.
RESULTS = ("rc", "timed_out", "spawn_to_ready_s", "spawn_to_first_s", "spawn_to_last_s",
           "prompts_per_s", "gpu_busy_pct", "texts", "texts_sha256", "texts_identical")  # fmt: skip


def load(res: Path) -> list[dict]:
    """The timelines of a result folder's runs, each with the folder it is in ("stage")."""
    rows = json.loads((res / "summary.json").read_text())
    out = []
    for row in rows:
        name = row.get("run")
        log = res / name / "log.txt" if name else None
        text = log.read_text(errors="replace") if log is not None and log.exists() else ""
        out.append({"stage": res.name, **timeline(row, text)})
    return out


def _head(timelines: list[dict], first: str) -> str:
    names = [f"{i}. {t['variant']} x{t['prompts']}" for i, t in enumerate(timelines, 1)]
    return f"| {first} | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n"


def results_table(timelines: list[dict]) -> str:
    """One line per run: where it ran, its ready, first and last result, its rate, its texts."""
    out = ("| run | folder | spawn to ready (s) | to first result (s) | to all results (s) | "
           "prompts/s from ready | texts (sha256) | identical |\n|---|---|---|---|---|---|---|---|\n")  # fmt: skip
    for i, t in enumerate(timelines, 1):
        r = t["results"]
        cells = [f"{i}. {t['variant']} x{t['prompts']}", f"{t.get('stage', '-')}/{t['run']}"]
        cells += [str(r.get(k, "-")) for k in ("spawn_to_ready_s", "spawn_to_first_s",
                                              "spawn_to_last_s", "prompts_per_s")]  # fmt: skip
        cells += [f"{r.get('texts', '-')} ({r.get('texts_sha256', '-')})"]
        cells += ["timed out" if r.get("timed_out") else str(r.get("texts_identical", "-"))]
        out += "| " + " | ".join(cells) + " |\n"
    return out


def steps_table(timelines: list[dict]) -> str:
    out = _head(timelines, "step: s from spawn (+ since the step before)")
    for key, label, _ in STEPS:
        cells = []
        for t in timelines:
            step = t["steps"].get(key)
            if step is None:
                cells.append("-")
            elif step["since_previous"] is None:
                cells.append(f"{step['t']:.1f} (beside)")
            else:
                cells.append(f"{step['t']:.1f} (+{step['since_previous']:.1f})")
        if any(c != "-" for c in cells):
            out += f"| {label} | " + " | ".join(cells) + " |\n"
    return out


FIGURE_ROWS = [
    ("vllm_version", "vLLM"),
    ("model_load_s", "model loading (s, vLLM's)"),
    ("model_gib", "model memory (GiB)"),
    ("dynamo_s", "Dynamo bytecode transform (s)"),
    ("compile_cache", "compile cache"),
    ("compile_cache_key", "compile cache key"),
    ("graphs_load_s", "compiled graphs loaded from the cache (s)"),
    ("graphs_compile_s", "graphs compiled (s)"),
    ("torch_compile_s", "torch.compile in total (s)"),
    ("kv_cache_gib", "KV cache memory (GiB)"),
    ("kv_cache_tokens", "KV cache (tokens)"),
    ("cuda_graphs_s", "CUDA graph capture (s, whole seconds)"),
    ("cuda_graphs_gib", "CUDA graphs' memory (GiB)"),
    ("init_engine_s", "init engine: profile, KV cache, warm-up (s)"),
    ("compilation_s", "of which compilation (s)"),
    ("encoder_compile_s", "of which the encoder's compilation (s)"),
]


def figures_table(timelines: list[dict]) -> str:
    out = _head(timelines, "vLLM's own figures")
    for key, label in FIGURE_ROWS:
        cells = [str(t["vllm"].get(key, "-") if t["vllm"].get(key) is not None else "-")
                 for t in timelines]  # fmt: skip
        if any(c != "-" for c in cells):
            out += f"| {label} | " + " | ".join(cells) + " |\n"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("res", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args(argv)
    timelines = [t for res in args.res if (res / "summary.json").exists() for t in load(res)]
    if not timelines:
        print("startup.py: no summary.json with runs in " + ", ".join(map(str, args.res)))
        return 1
    text = "\n".join((results_table(timelines), steps_table(timelines), figures_table(timelines)))
    if args.json:
        args.json.write_text(json.dumps(timelines, indent=1) + "\n")
    if args.md:
        args.md.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
