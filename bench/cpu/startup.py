"""Figure 1: start-up of the light commands vs the audio seed script's ``--help``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.cpu.common import (
    BIN,
    PYTHON,
    REPO,
    WORKERS,
    bench_env,
    last_json_line,
    log,
    median,
    run_child,
)

COMMANDS = [["--help"], ["image", "--help"], ["models", "--json"]]
HEAVY = ("vllm", "torch", "transformers")
SEED = REPO / "tests" / "golden" / "original_examples" / "audio_language.txt"


def imported_modules(argv: list[str]) -> dict[str, Any]:
    """Which top-level packages ``mmrun ARGV`` imports, from ``python -X importtime``."""
    code = f"import sys; sys.argv = ['mmrun', *{argv!r}]; from mmrun.cli.main import main; main()"
    child = run_child([PYTHON, "-X", "importtime", "-c", code], env=bench_env())
    tops: dict[str, int] = {}
    shallow: dict[str, int] = {}  # imports at depth 0 or 1: cumulative microseconds
    total_us = 0
    for line in child.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        if not parts[1].strip().isdigit():
            continue  # the header line
        raw = parts[2].rstrip()
        depth = (len(raw) - len(raw.lstrip())) // 2
        name, cumulative = raw.strip(), int(parts[1])
        if depth == 0:
            total_us += cumulative
            tops.setdefault(name.split(".")[0], 0)
        if depth <= 1:
            shallow[name] = max(shallow.get(name, 0), cumulative)
        tops.setdefault(name.split(".")[0], 0)
    return {
        "heavy_imported": {m: m in tops for m in HEAVY},
        "modules": len(tops),
        "import_total_ms": round(total_us / 1000, 1),
        "largest_imports_ms": {
            k: round(v / 1000, 1) for k, v in sorted(shallow.items(), key=lambda kv: -kv[1])[:5]
        },
    }


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall time, peak RSS (MiB) and CPU time (user + system) of argv, from the launcher."""
    child = run_child([PYTHON, str(WORKERS / "measure.py"), *argv], env=env)
    out = last_json_line(child.stdout) if child.returncode == 0 else {}
    if out.get("returncode") != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {child.stdout[-500:]} {child.stderr[-2000:]}")
    return float(out["wall_s"]), float(out["maxrss_mib"]), float(out["cpu_s"])


def run(reps: int, seed_reps: int, tmp: Path) -> dict[str, Any]:
    env = bench_env()
    mmrun = str(BIN / "mmrun")
    runs: dict[str, list[tuple[float, float, float]]] = {" ".join(c): [] for c in COMMANDS}
    for i in range(reps):
        for argv in COMMANDS:
            runs[" ".join(argv)].append(measured([mmrun, *argv], env))
        log(f"startup rep {i + 1}/{reps}")
    commands = {}
    for argv in COMMANDS:
        key = " ".join(argv)
        walls = [w for w, _, _ in runs[key]]
        rss = [r for _, r, _ in runs[key]]
        cpu = [c for _, _, c in runs[key]]
        commands[key] = {
            "wall_s": walls,
            "maxrss_mib": rss,
            "cpu_s": cpu,
            "median_wall_s": median(walls),
            "median_maxrss_mib": median(rss),
            "median_cpu_s": median(cpu),
            "max_maxrss_mib": max(rss),
            **imported_modules(argv),
        }

    seed = tmp / "audio_language.py"
    seed.write_text(SEED.read_text().split("\n", 1)[1])
    seed_runs = []
    for i in range(seed_reps):
        seed_runs.append(measured([PYTHON, str(seed), "--help"], env))
        log(f"seed --help {i + 1}/{seed_reps}: {seed_runs[-1][0]:.2f} s")
    walls = [w for w, _, _ in seed_runs]
    rss = [r for _, r, _ in seed_runs]
    cpu = [c for _, _, c in seed_runs]
    return {
        "commands": commands,
        "baseline": {
            "what": "python audio_language.py --help (the audio seed, imports vLLM first)",
            "wall_s": walls,
            "maxrss_mib": rss,
            "cpu_s": cpu,
            "median_wall_s": median(walls),
            "median_maxrss_mib": median(rss),
            "median_cpu_s": median(cpu),
        },
        "reps": reps,
        "seed_reps": seed_reps,
    }
