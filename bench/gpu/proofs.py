"""Issue 16 item 4: every tiny-checkpoint row of the CPU offline proof through mmrun's CLI on
CUDA, eager, by generate and (where the model has a chat template) by chat, several CLI runs at
once on the GPUs, then a table.

The rows come from the index that build_tiny.py wrote next to the checkpoints (.gpu/t), so
whatever was built is what runs. Each run is the CPU proof's command (tests/e2e/
test_cli_e2e.py): the seed's default media served from 127.0.0.1 (MMRUN_ASSETS_BASE_URL), the
most media the model takes per prompt (2 where unlimited), 3 prompts, 6 tokens, --json,
--trust-remote-code, enforce_eager, -tp 1, plus the checkpoint's own engine and sampling
arguments. On the GPU each run also gets gpu_memory_utilization 0.05 (the free-memory check
at start) and a fixed KV cache (kv_cache_memory_bytes: vLLM then skips its memory profiling,
which other processes starting and ending on the same GPU would upset). The video rows run
the clip of tests/e2e/test_video_e2e.py.

The checks are the CPU proof's: one output per prompt, each with generated tokens, and more
prompt tokens than the text alone (the processor expanded the placeholders; for encoder-decoder
models, exactly the text's).

PROOFS_VERBOSE=1 adds --verbose to each run (vLLM's log); PROOFS_SAMPLE=1 runs each with the
stack sampler (smp/: every process's stacks every 20 ms into RES/<run>/smp; smp.py reads them),
to see where a run that never ends waits.

usage: proofs.py run --index I --tiny DIR --media DIR --res DIR [--par N] [--budget S] [--gpus 0,1]
       proofs.py table --index I --tiny DIR --res DIR
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import probe_env, stamp, table

NUM_PROMPTS = 3
MAX_TOKENS = "6"


def load_rows(index: Path) -> list[dict[str, Any]]:
    return list(json.loads(index.read_text())["rows"])


def runs_of(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(row, method) for every runnable row: all generate runs first, then the chat runs."""
    runnable = [r for r in rows if r["runnable"]]
    # A row expected to fail (build_tiny.py's import check) runs once, to confirm it.
    chats = [(r, "chat") for r in runnable if r.get("chat") and not r.get("expect_fail")]
    return [(r, "generate") for r in runnable] + chats


def run_name(row: dict[str, Any], method: str) -> str:
    return f"{row['modality']}-{row['key']}-{method}"


def command(row: dict[str, Any], method: str, tiny: Path, media: Path, kv_bytes: int) -> list[str]:
    path = tiny / row["dir"]
    cmd = [sys.executable, "-m", "mmrun", row["modality"], "-m", row["key"], "--model", str(path)]
    if row["modality"] == "video":
        cmd += ["-v", str(media / row.get("source", "clip.mp4"))]
    else:
        cmd += ["-n", str(row["count"]), "--num-prompts", str(NUM_PROMPTS)]
    cmd += ["--max-tokens", MAX_TOKENS, "--json", "--trust-remote-code", "-tp", "1"]
    cmd += ["--engine-arg", "enforce_eager=true", "--engine-arg", "gpu_memory_utilization=0.05"]
    cmd += ["--engine-arg", f"kv_cache_memory_bytes={kv_bytes}"]
    cmd += [f"--engine-arg={k}={json.dumps(v)}" for k, v in row.get("engine_args", {}).items()]
    cmd += [f"--sampling-arg={k}={json.dumps(v)}" for k, v in row.get("sampling_args", {}).items()]
    if method == "chat":
        cmd += ["--method", "chat"]
    if os.environ.get("PROOFS_VERBOSE"):  # vLLM's own log in the run's log (a slow start)
        cmd += ["--verbose"]
    return cmd


def serve(media: Path) -> str:
    """A real HTTP server on 127.0.0.1 serving MEDIA (as the CPU proof's media_server)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(media))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    rows = load_rows(Path(args.index))
    res = Path(args.res)
    res.mkdir(parents=True, exist_ok=True)
    url = serve(Path(args.media))
    gpus = args.gpus.split(",")
    jobs = runs_of(rows)
    # a re-run of some rows only (PROOFS_ROWS="audio/cohere_asr audio/granite_speech")
    if args.rows:
        wanted = set(args.rows.split())
        unknown = wanted - {r["row"] for r in rows}
        if unknown:
            print(f"proofs: no such rows in the index: {sorted(unknown)}", file=sys.stderr)
            return 2
        jobs = [job for job in jobs if job[0]["row"] in wanted]
    print(
        f"{stamp(t0)} {len(rows)} rows, {len(jobs)} CLI runs, {args.par} at a time on GPUs {gpus}; media at {url}",
        flush=True,
    )
    lock = threading.Lock()
    counter = [0]
    records = open(res / "runs.jsonl", "a", buffering=1)  # noqa: SIM115 (closed after the pool)

    def one(job: tuple[dict[str, Any], str]) -> None:
        row, method = job
        name = run_name(row, method)
        with lock:
            slot = counter[0]
            counter[0] += 1
        left = args.budget - (time.time() - t0)
        if left < args.min_left:
            rec = {
                "run": name,
                "row": row["row"],
                "method": method,
                "rc": None,
                "skipped": f"out of time ({left:.0f}s left)",
            }
            records.write(json.dumps(rec) + "\n")
            return
        gpu = gpus[slot % len(gpus)]
        cmd = command(row, method, Path(args.tiny), Path(args.media), args.kv_bytes)
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": gpu,
            "MMRUN_ASSETS_BASE_URL": url,
            "MMRUN_CACHE_DIR": str(res / "cache" / name),
            "HF_HUB_OFFLINE": "1",
        }
        if os.environ.get("PROOFS_SAMPLE"):  # every process's stacks, into res/<run>/smp (a hang)
            env.update(probe_env(res / name, "smp", "MMSAMPLE_DIR"))
        (res / f"{name}.cmd").write_text(" ".join(cmd) + "\n")
        if args.dry:
            records.write(
                json.dumps(
                    {
                        "run": name,
                        "row": row["row"],
                        "method": method,
                        "rc": None,
                        "skipped": "dry run",
                    }
                )
                + "\n"
            )
            return
        start = time.time()
        timeout = max(30, min(args.timeout, left - 10))
        with open(res / f"{name}.json", "wb") as out, open(res / f"{name}.log", "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
            try:
                rc: int | str | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = "timeout"
            with contextlib.suppress(OSError):  # the run's engine processes, whatever became of it
                os.killpg(proc.pid, 9)
            proc.wait()
        wall = round(time.time() - start, 1)
        rec = {
            "run": name,
            "row": row["row"],
            "method": method,
            "rc": rc,
            "wall_s": wall,
            "gpu": gpu,
            "started_s": round(start - t0, 1),
        }
        records.write(json.dumps(rec) + "\n")
        err_text = (res / f"{name}.log").read_text(errors="replace").strip().splitlines()
        last = err_text[-1][:160] if err_text and rc != 0 else ""
        print(f"{stamp(t0)} {name:42} rc={rc} {wall:6.1f}s GPU{gpu} {last}", flush=True)

    with ThreadPoolExecutor(max_workers=args.par) as pool:
        list(pool.map(one, jobs))
    records.close()
    print(f"{stamp(t0)} all runs done", flush=True)
    return 0


def text_tokens(path: Path, doc: dict[str, Any]) -> int | None:
    """The prompt's tokens without its media, as the CPU proof counts them."""
    if doc.get("prompt") is None:
        ids = doc.get("prompt_token_ids")
        return len(ids) - 1 if ids else None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=True)
        return len(tok(doc["prompt"], add_special_tokens=False).input_ids)
    except Exception:
        return None


def check(
    row: dict[str, Any], method: str, doc: dict[str, Any], tiny: Path
) -> tuple[bool, str, int | None]:
    outs = doc.get("outputs", [])
    want = 1 if row["modality"] == "video" else NUM_PROMPTS
    if len(outs) != want:
        return False, f"{len(outs)} outputs, want {want}", None
    if not all(o.get("completion_tokens", 0) > 0 for o in outs):
        return False, "an output with no generated tokens", None
    # mmrun's document holds the loader's prompt for chat runs too: the CPU proof compares
    # both methods' prompt tokens with it.
    text = text_tokens(tiny / row["dir"], doc)
    prompt_tokens = [o["prompt_tokens"] for o in outs]
    if text is None:
        return True, "text tokens not counted", None
    if row.get("encoder_decoder"):
        ok = all(p == text for p in prompt_tokens)
        return ok, "" if ok else f"prompt tokens {prompt_tokens} != text {text}", text
    ok = all(p > text for p in prompt_tokens)
    return ok, "" if ok else f"prompt tokens {prompt_tokens} not above text {text}", text


def classify(log: str) -> str:
    """Why a run failed, in a few words, from mmrun's one-line error and the log."""
    low = log.lower()
    last = next((line for line in reversed(log.strip().splitlines()) if line.strip()), "")
    if "importerror" in low and "transformers" in low:
        return "needs another transformers: " + last[:200]
    if "cannot import name" in low or "no module named" in low:
        return "import error: " + last[:200]
    return last[:240]


def make_table(args: argparse.Namespace) -> int:
    rows = load_rows(Path(args.index))
    res = Path(args.res)
    tiny = Path(args.tiny)
    recs: dict[str, dict[str, Any]] = {}
    path = res / "runs.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        rec = json.loads(line)
        recs[rec["run"]] = rec
    out_rows = []
    counts = {"ok": 0, "failed": 0, "not run": 0}
    for row, method in runs_of(rows):
        name = run_name(row, method)
        rec = recs.get(name)
        doc: dict[str, Any] = {}
        jpath = res / f"{name}.json"
        if jpath.exists() and jpath.stat().st_size:
            try:
                doc = json.loads(jpath.read_text())
            except json.JSONDecodeError:
                doc = {}
        if rec is None or rec.get("skipped"):
            status, note = "not run", (rec or {}).get("skipped", "no record")
            counts["not run"] += 1
            out_rows.append([row["row"], method, status, "-", "-", "-", "-", note])
            continue
        if rec["rc"] == 0 and doc:
            ok, note, _ = check(row, method, doc, tiny)
            status = "ok" if ok else "FAILED check"
        else:
            ok = False
            log = (
                (res / f"{name}.log").read_text(errors="replace")
                if (res / f"{name}.log").exists()
                else ""
            )
            status, note = f"FAILED rc={rec['rc']}", classify(log)
        counts["ok" if ok else "failed"] += 1
        outs = doc.get("outputs", [])
        out_rows.append(
            [
                row["row"],
                method,
                status,
                outs[0]["prompt_tokens"] if outs else "-",
                sum(o["completion_tokens"] for o in outs) if outs else "-",
                doc.get("timings", {}).get("engine_start_s", "-"),
                rec.get("wall_s"),
                (
                    note
                    + (f" (stand-in: {row['standin']})" if row.get("standin") else "")
                    + (f" [expected: {row['expect_fail']}]" if row.get("expect_fail") else "")
                ).strip(),
            ]
        )
    lines = [
        "## The CLI on CUDA: every tiny-checkpoint row (vLLM 0.26.0, transformers 5.17, H200, eager)",
        "",
        f"{counts['ok']} runs ok, {counts['failed']} failed, {counts['not run']} not run.",
        "",
        table(
            [
                "row",
                "method",
                "result",
                "prompt tokens",
                "completion tokens",
                "engine start s",
                "wall s",
                "note",
            ],
            out_rows,
        ),
        "",
        "### Rows not runnable on the device",
    ]
    for row in rows:
        if not row["runnable"]:
            lines.append(f"- {row['row']}: {row['reason']}")
        elif row.get("expect_fail"):
            lines.append(f"- {row['row']} (run once to confirm, see above): {row['expect_fail']}")
    text = "\n".join(lines) + "\n"
    (res / "proofs_table.md").write_text(text)
    print(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--index", required=True)
    r.add_argument("--tiny", required=True)
    r.add_argument("--media", required=True)
    r.add_argument("--res", required=True)
    r.add_argument("--par", type=int, default=int(os.environ.get("PROOFS_PAR", "14")))
    r.add_argument("--budget", type=float, default=float(os.environ.get("PROOFS_BUDGET", "400")))
    r.add_argument("--timeout", type=float, default=float(os.environ.get("PROOFS_TIMEOUT", "240")))
    r.add_argument("--min-left", type=float, default=45, help="start no run with less left")
    r.add_argument("--gpus", default=os.environ.get("PROOFS_GPUS", "0,1"))
    r.add_argument("--rows", default=os.environ.get("PROOFS_ROWS", ""), help="only these rows")
    r.add_argument("--kv-bytes", type=int, default=1 << 30)
    r.add_argument("--dry", action="store_true", help="write the commands only")
    t = sub.add_parser("table")
    t.add_argument("--index", required=True)
    t.add_argument("--tiny", required=True)
    t.add_argument("--res", required=True)
    args = ap.parse_args()
    return run(args) if args.cmd == "run" else make_table(args)


if __name__ == "__main__":
    sys.exit(main())
