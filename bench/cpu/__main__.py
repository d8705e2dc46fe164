"""``make bench``: run every CPU figure once, write bench/cpu/results.json and the CPU section
of docs/performance.md (only the text between its cpu markers)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cpu import (
    assets,
    batching,
    loops,
    media,
    overlap,
    repeat,
    report,
    served,
    startup,
    stream,
    tiny,
)
from bench.cpu.common import REPO, LatencyServer, log, machine, mmrun_source

RESULTS = Path(__file__).with_name("results.json")
DOC = REPO / "docs" / "performance.md"
FIGURES = ("startup", "media", "repeat", "overlap", "batching", "loops", "stream", "served")
FULL = {
    "startup": 7,
    "seed": 3,
    "media_cold": 7,
    "media_warm": 9,
    "media_first": 5,
    "overlap": 3,
    "render": 2,
    "loops": 3,
    "stream": 3,
    "served": 5,
}
QUICK = {
    "startup": 2,
    "seed": 1,
    "media_cold": 2,
    "media_warm": 3,
    "media_first": 1,
    "overlap": 1,
    "render": 2,
    "loops": 1,
    "stream": 1,
    "served": 2,
}
LATENCY_S = 0.1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (development)")
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated subset of {FIGURES}; "
        "writes the results to a temporary file, not to docs/",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --only: put the figures run into bench/cpu/results.json (the others stay, "
        "each with the run it came from) and rewrite the CPU section of docs/performance.md",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: rewrite the CPU section of docs/performance.md from "
        "bench/cpu/results.json",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    if args.render:
        report.write(DOC, report.render(json.loads(RESULTS.read_text())))
        log(f"rewrote the CPU section of {DOC.relative_to(REPO)} from {RESULTS.relative_to(REPO)}")
        return 0
    only = [f for f in args.only.split(",") if f] or list(FIGURES)
    unknown = set(only) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}")
    reps = QUICK if args.quick else FULL

    started = time.time()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "command": "python -m bench.cpu --quick" if args.quick else "make bench",
        "machine": machine(),
        "mmrun_source_start": mmrun_source(),
        "repetitions": reps,
        "load_average_start": list(os.getloadavg()),
        "load_samples": [],
    }
    tmp = Path(tempfile.mkdtemp(prefix="mmrun-bench-"))
    server = None

    def sample(label: str) -> None:
        results["load_samples"].append({"at": label, "load1": os.getloadavg()[0]})

    try:
        www = tmp / "www"
        results["images"] = assets.write_default_images(www)
        server = LatencyServer(www, LATENCY_S)
        results["latency_s"] = LATENCY_S
        if "startup" in only:
            sample("startup")
            log("figure 1: start-up")
            results["startup"] = startup.run(reps["startup"], reps["seed"], tmp)
        if "media" in only:
            sample("media")
            log("figure 2: media")
            results["media"] = media.run(
                server, reps["media_cold"], reps["media_warm"], reps["media_first"], tmp
            )
        if {"repeat", "overlap", "batching", "loops", "stream", "served"} & set(only):
            log("building the tiny qwen2_5_vl checkpoint")
            checkpoint = tiny.build(tmp)
            results["tiny"] = {
                "key": tiny.KEY,
                "engine_args": checkpoint.engine_args,
                "build_s": checkpoint.build_s,
            }
            if "repeat" in only:
                sample("repeat")
                log("figure 5: repeat runs (chat-template rendering)")
                results["repeat"] = repeat.run(checkpoint, overlap.NUM_IMAGES, reps["render"])
            if "overlap" in only:
                sample("overlap")
                log("figure 3: overlap (about a minute a run)")
                results["overlap"] = overlap.run(server, checkpoint, reps["overlap"], tmp)
            if "batching" in only:
                sample("batching")
                log("figure 4: batching")
                results["batching"] = batching.run(checkpoint, tmp)
            if "loops" in only:
                sample("loops")
                log("figure 6: engine loops (256 prompts, in one process)")
                results["loops"] = loops.run(checkpoint, tmp, reps["loops"])
            if "stream" in only:
                sample("stream")
                log("figure 7: streamed batch mode vs one call (256 prompts, about 30 s a run)")
                results["stream"] = stream.run(checkpoint, tmp, reps["stream"])
            if "served" in only:
                sample("served")
                log("figure 8: --server against mmrun's own engine (1,024 prompts, one server)")
                results["served"] = served.run(checkpoint, tmp, reps["served"])
    finally:
        if server is not None:
            server.close()
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    results["load_average_end"] = list(os.getloadavg())
    results["mmrun_source_end"] = mmrun_source()
    if results["mmrun_source_end"]["sha256"] != results["mmrun_source_start"]["sha256"]:
        log("WARNING: mmrun/ changed during the run; its figures mix two versions")
    results["duration_s"] = time.time() - started

    if only != list(FIGURES) and args.update:
        merged = update(json.loads(RESULTS.read_text()), results, only, args)
        RESULTS.write_text(json.dumps(merged, indent=1) + "\n")
        report.write(DOC, report.render(merged))
        log(f"updated {', '.join(only)} in {RESULTS.relative_to(REPO)} and {DOC.relative_to(REPO)}")
        return 0
    if only != list(FIGURES):
        out = Path(tempfile.gettempdir()) / "mmrun-bench-partial.json"
        out.write_text(json.dumps(results, indent=1) + "\n")
        log(f"partial run: results in {out}; docs/ and bench/cpu/results.json untouched")
        return 0
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    report.write(DOC, report.render(results))
    log(
        f"wrote {RESULTS.relative_to(REPO)} and the CPU section of "
        f"{DOC.relative_to(REPO)} in {results['duration_s'] / 60:.1f} min"
    )
    return 0


def update(
    merged: dict[str, Any], results: dict[str, Any], only: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The last full run's results with the figures of this partial run put in; the run that
    measured them is listed under "updates" (an earlier update of the same figures dropped)."""
    run = {
        k: results[k]
        for k in (
            "started_utc",
            "machine",
            "mmrun_source_start",
            "mmrun_source_end",
            "repetitions",
            "load_average_start",
            "load_average_end",
            "load_samples",
            "duration_s",
        )
    }
    run["figures"] = only
    run["command"] = f"python -m bench.cpu --only {','.join(only)} --update" + (
        " --quick" if args.quick else ""
    )
    if "tiny" in results:
        run["tiny"] = results["tiny"]
    for figure in only:
        merged[figure] = results[figure]
    kept = [u for u in merged.get("updates", []) if not set(u["figures"]) <= set(only)]
    merged["updates"] = [*kept, run]
    return merged


if __name__ == "__main__":
    sys.exit(main())
