"""Summarise phases/sitecustomize.py's step records: where the GPU's time went during a batch.

For each run folder with a phases/ folder: the batch's window in wall time (raw_bench.py's
RESULT_BATCH start_wall/end_wall for each set; mmrun's: the result line's arrival minus its
timings.generate_s), the engine core's steps in that window, and their GPU time split into

  encoder      the vision encoder (e0 -> e1)
  prefill fwd  the rest of execute_model in steps that carry prompt tokens (a -> b, less the
               encoder): input preparation on the GPU and the language model's forward
  decode fwd   execute_model in decode-only steps (one token per request)
  sampling     sample_tokens (c -> d)
  between      GPU clock time not inside any of those: the GPU waiting for the host between
               steps (and b -> c)

Each is the time between CUDA events along the runner's stream, so a phase whose kernels are
launched slower than they run counts its own idle gaps. Percentages are of the GPU span (first
step's a to the last step's d).

usage: phases.py RUN_DIR [RUN_DIR ...]   (prints a Markdown table)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, read_run, result_window, table

HEADER = [
    "run",
    "set",
    "steps (prefill / decode-only)",
    "wall window s",
    "GPU span s",
    "encoder s",
    "prefill fwd s",
    "decode fwd s",
    "sampling s",
    "between s",
    "encoder items",
    "tokens",
]


def records(run_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / "phases").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by the process's end
    out.sort(key=lambda r: r["t"])
    return out


def windows(run_dir: Path) -> list[tuple[str, float, float]]:
    """(set, start wall, end wall) of each measured batch of the run."""
    rec = read_run(run_dir)
    if rec.get("raw"):
        return [(b["set"], b["start_wall"], b["end_wall"]) for b in rec["raw"]]
    window = result_window(rec)
    return [] if window is None else [("batch", *window)]


def breakdown(steps: list[dict[str, Any]]) -> dict[str, float]:
    enc = pre = dec = smp = 0.0
    n_pre = n_dec = items = toks = 0
    for r in steps:
        e = (r["e1"] - r["e0"]) if "e0" in r and "e1" in r else 0.0
        fwd = r["b"] - r["a"] - e
        enc += e
        if r["toks"] > r["reqs"]:
            pre += fwd
            n_pre += 1
        else:
            dec += fwd
            n_dec += 1
        if "c" in r and "d" in r:
            smp += r["d"] - r["c"]
        items += max(r.get("enc_items", 0), 0)
        toks += max(r["toks"], 0)
    span = steps[-1].get("d", steps[-1]["b"]) - steps[0]["a"]
    busy = enc + pre + dec + smp
    return {
        "span": span / 1e3,
        "enc": enc / 1e3,
        "pre": pre / 1e3,
        "dec": dec / 1e3,
        "smp": smp / 1e3,
        "between": (span - busy) / 1e3,
        "n_pre": n_pre,
        "n_dec": n_dec,
        "items": items,
        "toks": toks,
    }


def pct(x: float, span: float) -> str:
    return f"{x:.2f} ({100 * x / span:.0f}%)" if span > 0 else fmt(x)


def rows(run_dir: Path) -> list[list[Any]]:
    recs = records(run_dir)
    out = []
    for name, t0, t1 in windows(run_dir):
        # a step's t is when the host entered execute_model; the GPU runs it a little later
        steps = [r for r in recs if t0 - 0.05 <= r["t"] <= t1]
        if not steps:
            out.append([run_dir.name, name, "no steps recorded", *["-"] * 9])
            continue
        b = breakdown(steps)
        s = b["span"]
        out.append(
            [
                run_dir.name,
                name,
                f"{b['n_pre']} / {b['n_dec']}",
                round(t1 - t0, 2),
                round(s, 2),
                pct(b["enc"], s),
                pct(b["pre"], s),
                pct(b["dec"], s),
                pct(b["smp"], s),
                pct(b["between"], s),
                b["items"],
                b["toks"],
            ]
        )
    return out


def summary(run_dirs: list[Path]) -> str:
    body = [row for d in run_dirs if (d / "phases").is_dir() for row in rows(d)]
    return table(HEADER, body) if body else ""


def main() -> int:
    print(summary([Path(p) for p in sys.argv[1:]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
