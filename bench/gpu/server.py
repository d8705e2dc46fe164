"""Side by side on one GPU: mmrun's streamed batch in an engine of its own, and the same batch
with --server against `mmrun serve` of the same key and engine arguments (one server per
--api-servers value), started once before the timed runs (as a CI job or a user would leave
it running). Rounds alternate the order; every engine holds the GPU at once, each with the
same share of its memory.

For each run: mmrun's own rate after its engine start (the summary line's prompts/s: for
--server, from its connection to the server), seconds from spawn to the first and the last
result, and whether every greedy text is identical to the first in-process run's. Also the
servers' seconds to ready, and the `vllm serve` command line each ran (its dry run).

usage: server.py --bench ROOT --model DIR --prompts N --res DIR [--rounds R]
                 [--max-tokens T] [--engine-args JSON] [--budget S] [--port P]
                 [--api-servers N[+KEY=JSON...][,...]] [--runbatch] [--warm W] [--starts K]
  ROOT: media.py's folder (mN.jsonl). --engine-args: engine arguments of every engine
  (default: gpu_memory_utilization 0.8 shared by the in-process engine and the servers, so
  that all fit on the GPU at once, and vLLM's multimodal processor cache and prefix cache
  off: a server keeps both between calls, an in-process run starts with them empty, so a
  server's later call could find the pictures processed, or their prompts' KV cached,
  already). --warm W (default 8): before the timed rounds, each server answers one call of
  W prompts (mW.jsonl, other pictures; 0: none), as a server left running has answered calls
  before: what the first requests after a server's start pay once is in no timed call.
  --api-servers: one `mmrun serve --api-servers N` per value (default 1), each its own
  variant, mmrun-server-aN, on ports P, P+1, ...; a value's "+KEY=JSON" parts are engine
  arguments of that server alone (no commas in them), e.g.
  "4,1+renderer_num_workers=8": four API server processes, and one process with eight
  threads preparing the requests (vLLM >= 0.26, processor cache off).
  --starts K: no runs; instead each --api-servers value's server is started K times, one at
  a time in alternating order, timed from its spawn to `mmrun serve`'s ready line, and stopped
  (what several API processes cost a server's start; the call's first start may fill the
  compile cache). Every engine then gets the share of two.
  --runbatch: `vllm run-batch` of the same prompts (media.py's bN.jsonl) in each round too,
  an engine of its own with the in-process engine's arguments; its rate is from its engine's
  ready line to its last result.
Writes RES/<variant>-<N>-<round>/ (log.txt, out.jsonl), RES/serve-LABEL.log and
RES/serve-LABEL-cmd.txt (LABEL: aN, then the value's other parts in letters, digits, '.' and
'_'), RES/state/server-PORT.log (the server's vLLM log), RES/summary.json and
RES/summary.md. Refuses at once when the engines' shares of the card are too small to start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from throughput import (
    MMRUN_FLAGS,
    command,
    compare_texts,
    error_lines,
    plus_parts,
    run_one,
    texts_of,
)

RATE = re.compile(r"([\d.]+) prompts/s, [\d.]+ output tok/s over (\S+) after the engine start")
GPU_SHARE = 0.8  # of the GPU's memory, split between the in-process engine and the servers
# Every engine's: no call finds a picture processed (bench/cpu/served.py turns that cache off
# too) or a prompt's KV cache computed by an earlier one.
NO_CACHES = {"mm_processor_cache_gb": 0, "enable_prefix_caching": False}
MIN_ENGINE_GIB = 30  # what one engine of the 3B shape needs for 512 x 4 (0.4 of an H100: 32 GiB)
ITEMS = 4  # media.py's images per prompt


def server_specs(values: str) -> list[tuple[str, int, dict]]:
    """--api-servers' values: (label, API processes, that server's own engine arguments)
    each. "4" is ("a4", 4, {}); "1+renderer_num_workers=8" is
    ("a1+renderer_num_workers=8", 1, {"renderer_num_workers": 8}). SystemExit in one line for a
    value that is not N[+KEY=VALUE...]."""
    specs = []
    for value in values.split(","):
        count, *parts = value.strip().split("+")
        try:
            extra, env = plus_parts(parts)
        except ValueError as exc:
            raise SystemExit(f"server.py: --api-servers {value!r}: {exc}") from None
        if env:  # a server's environment is mmrun serve's: one per call
            raise SystemExit(
                f"server.py: --api-servers {value!r}: takes engine arguments (KEY=VALUE), "
                "not env.NAME=VALUE"
            )
        if not count.isdigit() or int(count) < 1:
            raise SystemExit(
                f"server.py: --api-servers {value!r}: "
                "begins with a number of API servers (1 or more)"
            )
        specs.append(("a" + value.strip(), int(count), extra))
    return specs


def file_label(label: str) -> str:
    """A server's label as a file name's part (letters, digits, '.', '_', '-')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


def serve_argv(model: str, engine_args: dict, port: int, api_servers: int = 1) -> list[str]:
    argv = [sys.executable, "-m", "mmrun", "serve", "-m", "qwen2_5_vl", "--modality", "image"]
    argv += [
        "--model",
        model,
        "--items",
        str(ITEMS),
        "--port",
        str(port),
        "--api-servers",
        str(api_servers),
        *MMRUN_FLAGS["qwen2_5_vl"],
    ]
    for key, value in engine_args.items():
        argv += ["--engine-arg", f"{key}={json.dumps(value)}"]
    return argv


def gpu_mib(field: str = "memory.used") -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return max((float(u) for u in out), default=None)


def too_small(share: float, engines: int, total_mib: float | None) -> str | None:
    """Why ``engines`` engines at ``share`` of the card each cannot run the 3B shape's batch,
    or None: under MIN_ENGINE_GIB each, vLLM finds no memory left for the KV cache (0.267 of
    an 80 GB H100: -0.7 GiB) and the call is spent on a server that never starts."""
    if total_mib is None or share * total_mib / 1024 >= MIN_ENGINE_GIB:
        return None
    return (
        f"{engines} engines at {share} of this card's {total_mib / 1024:.0f} GiB each: under "
        f"{MIN_ENGINE_GIB} GiB, the KV cache does not fit; give one --api-servers value per call"
    )


def gpu_back_to(baseline: float | None, limit: float = 60) -> None:
    """Wait until the GPU holds no more than the server's memory (a run's engine processes
    give theirs back seconds after it ends)."""
    end = time.time() + limit
    while baseline is not None and time.time() < end:
        used = gpu_mib()
        if used is None or used < baseline + 2000:
            return
        time.sleep(0.5)


def default_engine_args(engines: int, total_mib: float | None) -> dict:
    """Every engine's arguments: an equal share of GPU_SHARE of the card, and no processor
    cache and no prefix cache. SystemExit, before anything starts, where a share is too small
    to start."""
    share = round(GPU_SHARE / engines, 3)
    problem = too_small(share, engines, total_mib)
    if problem is not None:
        raise SystemExit(f"server.py: {problem}")
    return {"gpu_memory_utilization": share, **NO_CACHES}


def seconds(text: str) -> float:
    """mmrun's duration ("41.2s", "1m03s") in seconds."""
    minutes, _, rest = text.rpartition("m")
    return (int(minutes) if minutes else 0) * 60 + float(rest.rstrip("s"))


def rate_of(log: Path) -> tuple[float | None, float | None]:
    """mmrun's prompts/s after its engine start, and that span, from its summary line."""
    found = RATE.findall(log.read_text(errors="replace")) if log.exists() else []
    if not found:
        return None, None
    per_s, span = found[-1]
    return float(per_s), seconds(span)


def ready_rate(rec: dict, n: int) -> tuple[float | None, float | None]:
    """A run's prompts/s from its engine's ready line to its last result, and that span
    (run_one's times), for a tool without mmrun's summary line."""
    ready, last = rec.get("ready"), rec.get("last")
    if ready is None or last is None or last <= ready:
        return None, None
    return round(n / (last - ready), 2), round(last - ready, 1)


def start_server(argv: list[str], log_path: Path) -> subprocess.Popen:
    log = open(log_path, "w")  # noqa: SIM115
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)  # fmt: skip


def ready_url(proc: subprocess.Popen, log_path: Path, timeout: float) -> str:
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()  # the ready line: the server's URL
    if not url.startswith("http"):
        proc.wait(timeout)
        raise SystemExit(
            f"mmrun serve ended without a ready line (rc {proc.returncode}): {log_path}"
        )
    return url


def warm_up(variant: str, url: str, args: argparse.Namespace) -> dict:
    """One untimed call of --warm prompts to a server, before the timed rounds."""
    run = args.res / f"{variant}-warm-{args.warm}"
    t = time.time()
    cmd, env, result = command("mmrun", args.warm, args.bench, args.model, run, {},
                               max_tokens=args.max_tokens)  # fmt: skip
    rec = run_one([*cmd, "--server", url], env, result, args.warm, run, 300)
    return {"run": f"{variant.removeprefix('mmrun-')}-warm", "prompts": args.warm,
            "rc": rec["rc"], "took_s": round(time.time() - t, 1)}  # fmt: skip


def time_starts(specs: list[tuple[str, int, dict]], args: argparse.Namespace) -> list[dict]:
    """--starts: each server started alone, K times in alternating order, timed to its ready
    line and stopped. Its vLLM log: RES/state-LABEL-K/server-PORT.log."""
    rows: list[dict] = []
    t0 = time.time()
    for k in range(1, args.starts + 1):
        for label, count, own in specs if k % 2 else specs[::-1]:
            name = f"start-{file_label(label)}-{k}"
            left = args.budget - (time.time() - t0)
            if left < 100:  # a start takes a minute or two
                print(f"{name}: skipped ({left:.0f}s of the budget left)", flush=True)
                continue
            os.environ["MMRUN_STATE_DIR"] = str(args.res / f"state-{file_label(label)}-{k}")
            argv = serve_argv(args.model, {**args.engine_args, **own}, args.port, count)
            t = time.time()
            proc = start_server(argv, args.res / f"{name}.log")
            row: dict = {"run": name, "api_servers": count}
            try:
                ready_url(proc, args.res / f"{name}.log", left - 30)
                row["ready_after_s"] = round(time.time() - t, 1)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(60)
            row["stopped_rc"] = proc.poll()
            rows.append(row)
            print(json.dumps(row), flush=True)
            (args.res / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, type=Path)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, type=int)
    ap.add_argument("--res", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--engine-args", type=json.loads, default=None)
    ap.add_argument("--budget", type=float, default=3600)
    ap.add_argument("--port", type=int, default=8390)
    ap.add_argument("--api-servers", default="1")
    ap.add_argument("--runbatch", action="store_true")
    ap.add_argument("--warm", type=int, default=8)
    ap.add_argument("--starts", type=int, default=0)
    args = ap.parse_args()
    t0, n = time.time(), args.prompts
    specs = server_specs(args.api_servers)
    if args.starts:
        if args.engine_args is None:
            args.engine_args = default_engine_args(2, gpu_mib("memory.total"))
        args.res.mkdir(parents=True, exist_ok=True)
        rows = time_starts(specs, args)
        (args.res / "summary.md").write_text(starts_table(rows))
        print(starts_table(rows))
        return 0
    if args.warm and not (args.bench / f"m{args.warm}.jsonl").exists():
        raise SystemExit(
            f"server.py: --warm {args.warm}: no {args.bench}/m{args.warm}.jsonl "
            f"(write it with media.py {args.bench} {args.warm}, or pass --warm 0)"
        )
    if args.engine_args is None:
        args.engine_args = default_engine_args(1 + len(specs), gpu_mib("memory.total"))
    args.res.mkdir(parents=True, exist_ok=True)
    # mmrun serve's own log (vLLM's processes) lands beside the results, in logs.tgz
    os.environ["MMRUN_STATE_DIR"] = str(args.res / "state")
    servers: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    for i, (label, count, own) in enumerate(specs):  # started at once
        v = f"mmrun-server-{label}"
        argv = serve_argv(args.model, {**args.engine_args, **own}, args.port + i, count)
        dry = subprocess.run([*argv, "--dry-run"], capture_output=True, text=True)
        (args.res / f"serve-{file_label(label)}-cmd.txt").write_text(dry.stdout + dry.stderr)
        logs[v] = args.res / f"serve-{file_label(label)}.log"
        servers[v] = start_server(argv, logs[v])
        time.sleep(2)
    rows: list[dict] = []
    urls = {}
    variants = ["mmrun", *servers, *(["runbatch"] if args.runbatch else [])]
    reference: dict[str, str] | None = None
    try:
        for v, proc in servers.items():
            urls[v] = ready_url(proc, logs[v], args.budget)
            ready = {"run": v.removeprefix("mmrun-"), "ready_after_s": round(time.time() - t0, 1)}
            print(json.dumps({**ready, "url": urls[v]}), flush=True)
            rows.append(ready)
        for v, url in urls.items() if args.warm else ():
            rows.append(warm_up(v, url, args))
            print(json.dumps(rows[-1]), flush=True)
        baseline = gpu_mib()
        for r in range(args.rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                name = f"{v}-{n}-{r + 1}"
                run = args.res / name
                left = args.budget - (time.time() - t0)
                if left < 30:
                    print(f"{name}: skipped ({left:.0f}s of the budget left)", flush=True)
                    continue
                # an engine of its own: the server's engine arguments; --server: the server's
                extra = {} if v in urls else args.engine_args
                tool = "runbatch" if v == "runbatch" else "mmrun"
                cmd, env, result = command(tool, n, args.bench, args.model, run, extra,
                                           max_tokens=args.max_tokens)  # fmt: skip
                if v in urls:
                    cmd += ["--server", urls[v]]
                gpu_back_to(baseline)
                rec = run_one(cmd, env, result, n, run, left - 5)
                per_s, span = rate_of(run / "log.txt") if tool == "mmrun" else ready_rate(rec, n)
                row = {"run": name, "variant": v, "prompts": n, "rc": rec["rc"],
                       "prompts_per_s": per_s, "after_start_s": span}  # fmt: skip
                if result is not None and (errors := error_lines(result)):
                    row["error_lines"] = errors
                for mark in ("first", "last"):
                    if rec.get(mark) is not None:
                        row[f"spawn_to_{mark}_s"] = round(rec[mark] - rec["spawn"], 1)
                # the reference is an in-process run's texts
                fields, reference = compare_texts(
                    texts_of(tool, run), n, reference, may_be_reference=v == "mmrun"
                )
                row.update(fields)
                rows.append(row)
                print(json.dumps(row), flush=True)
                (args.res / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    finally:
        for server in servers.values():
            with contextlib.suppress(ProcessLookupError):  # one that ended on its own
                os.killpg(server.pid, signal.SIGTERM)
        for v, server in servers.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(60)
            rows.append({"run": v.removeprefix("mmrun-"), "stopped_rc": server.poll()})
        (args.res / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.res / "summary.md").write_text(table(rows))
    print(table(rows))
    return 0


def starts_table(rows: list[dict]) -> str:
    """--starts: each start's seconds from spawn to the ready line."""
    lines = ["| start | API processes | spawn to ready (s) | stopped rc |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['api_servers']} | {r.get('ready_after_s', '-')} | "
                     f"{r.get('stopped_rc')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def table(rows: list[dict]) -> str:
    """The runs, and each round's rates against the in-process one and run-batch's."""
    runs = [r for r in rows if r.get("variant")]
    lines = ["| run | prompts/s after engine start | spawn to first result (s) | spawn to all "
             "results (s) | texts identical | error lines |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in runs:
        lines.append(f"| {r['run']} | {r.get('prompts_per_s') or '-'} | {r.get('spawn_to_first_s', '-')} | "
                     f"{r.get('spawn_to_last_s', '-')} | {r.get('texts_identical', '-')} | "
                     f"{r.get('error_lines', 0)} |")  # fmt: skip
    # a run's name is its variant, then the prompts and the round: "mmrun-512-1"
    by_round: dict[str, dict[str, float]] = {}
    for r in runs:
        if r.get("prompts_per_s"):
            suffix = r["run"].removeprefix(r["variant"])
            by_round.setdefault(suffix, {})[r["variant"]] = r["prompts_per_s"]
    for suffix, rates in sorted(by_round.items()):
        for v in sorted(rates):
            for base in ("mmrun", "runbatch"):  # in-process, and vllm run-batch
                if v not in (base, "mmrun") and base in rates:
                    lines.append(f"\n{v}{suffix} / {base}{suffix} = "
                                 f"{rates[v] / rates[base]:.2f}x")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
