"""Figure 8: a batch through ``--server`` against the same batch in mmrun's own engine.

One ``mmrun serve`` of the tiny checkpoint is started first and left running, as a CI job
would; then each round runs the batch in mmrun's own engine and against the server, in
alternating order. For each run: its rate from its engine's start (for ``--server``, from its
connection) to the last line, as mmrun's summary line gives it; its first result line from
spawn; the prompt tokens the engine counted and the greedy texts, against the first
in-process run's of the same round. Each round sends pictures of its own, as each call to a
server left running does: the server never finds a picture processed or a prompt's KV cache
computed by an earlier call, which an in-process run, starting empty, could not. Both engines
have the same arguments, vLLM's multimodal processor cache off.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.cpu.assets import write_png_set
from bench.cpu.common import BIN, bench_env, log, median, run_child
from bench.cpu.tiny import KEY, Tiny

PROMPTS = 1024
MAX_TOKENS = 32
OVERRIDES = {"max_num_seqs": 16, "mm_processor_cache_gb": 0}
ROUNDS = 5
SERVER_START_S = 600.0
RATE = re.compile(r"([\d.]+) prompts/s, [\d.]+ output tok/s over (\S+) after the engine start")


def seconds(text: str) -> float:
    """mmrun's duration ("41.2s", "1m03s") in seconds."""
    minutes, _, rest = text.rpartition("m")
    return (int(minutes) if minutes else 0) * 60 + float(rest.rstrip("s"))


def summary_rate(stderr: str) -> tuple[float, float]:
    """The summary line's prompts/s after the engine start, and that span in seconds."""
    found = RATE.findall(stderr)
    if not found:
        raise RuntimeError("no summary line with a rate:\n" + stderr[-3000:])
    per_s, span = found[-1]
    return float(per_s), seconds(span)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``mmrun serve`` in a process group of its own; ``url`` once it printed its ready line."""

    def __init__(self, tiny: Tiny, folder: Path) -> None:
        port = free_port()
        argv = [str(BIN / "mmrun"), "serve", "-m", KEY, "--modality", "image"]
        argv += ["--model", str(tiny.path), *tiny.flags(**OVERRIDES), "--port", str(port)]
        self.log = folder / "serve.log"
        env = bench_env(MMRUN_STATE_DIR=str(folder / "state"))
        with open(self.log, "wb") as err:
            self.process = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=err, start_new_session=True
            )
        line: list[bytes] = []
        stdout = self.process.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(SERVER_START_S)
        self.url = line[0].decode().strip() if line else ""
        if not self.url.startswith("http"):
            self.close()
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"mmrun serve printed no URL:\n{tail}")

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _answers(path: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {
        "lines": len(rows),
        "ok": sum(1 for r in rows if r.get("error") is None),
        "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in rows),
        "texts": {r["id"]: r.get("text") for r in rows},
    }


def _manifest(folder: Path, round_: int) -> Path:
    """A round's PROMPTS prompts, each with a picture of this round alone."""
    images = write_png_set(folder / f"img{round_}", "s", PROMPTS, seed=300 + round_, size=56)
    manifest = folder / f"manifest-{round_}.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"id": f"p{i:03d}", "image": str(p)}) + "\n" for i, p in enumerate(images)
        )
    )
    return manifest


def run(tiny: Tiny, tmp: Path, rounds: int = ROUNDS) -> dict[str, Any]:
    folder = tmp / "served"
    manifests = [_manifest(folder, i) for i in range(rounds)]
    common = ["--max-tokens", str(MAX_TOKENS), "--sampling-arg", "ignore_eos=true"]
    started = time.monotonic()
    server = Server(tiny, folder)
    ready_s = time.monotonic() - started
    log(f"served: mmrun serve ready after {ready_s:.1f} s at {server.url}")
    # One cache folder for every run, as on a user's machine: a call against the server finds
    # the prompts an earlier call rendered (mmrun.templates.RememberedRenderer).
    env = bench_env(MMRUN_CACHE_DIR=str(folder / "cache"))
    runs: dict[str, list[dict[str, Any]]] = {"in_process": [], "server": []}
    try:
        for i in range(rounds):
            kinds = ["in_process", "server"] if i % 2 == 0 else ["server", "in_process"]
            for kind in kinds:
                out = folder / f"out-{kind}-{i}.jsonl"
                extra = ["--server", server.url] if kind == "server" else []
                load1 = os.getloadavg()[0]
                args = ["--input", str(manifests[i]), *common, "-o", str(out), *extra]
                child = run_child(tiny.mmrun(*args, **OVERRIDES), env=env, watch=out)
                if child.returncode != 0:
                    raise RuntimeError(
                        f"mmrun ({kind}) exited {child.returncode}:\n{child.stderr[-3000:]}"
                    )
                rate, span = summary_rate(child.stderr)
                lines = child.lines_at or []
                runs[kind].append(
                    {
                        "round": i,
                        "load1": load1,
                        "wall_s": child.wall_s,
                        "prompts_per_s": rate,
                        "after_start_s": span,
                        "first_line_s": lines[0][0] if lines else None,
                        "last_line_s": lines[-1][0] if lines else None,
                        **_answers(out),
                    }
                )
                log(
                    f"served round {i + 1}/{rounds} {kind}: {rate:.2f} prompts/s over {span:.1f} s,"
                    f" first line {lines[0][0] if lines else float('nan'):.1f} s from spawn"
                )
    finally:
        server.close()
    references = {r["round"]: r["texts"] for r in runs["in_process"]}
    for kind_runs in runs.values():
        for r in kind_runs:
            texts, reference = r.pop("texts"), references[r["round"]]
            r["texts_identical"] = sum(1 for k, v in texts.items() if reference.get(k) == v)
    paired = [
        s["prompts_per_s"] / p["prompts_per_s"]
        for p, s in zip(runs["in_process"], runs["server"], strict=True)
    ]
    return {
        "prompts": PROMPTS,
        "max_tokens": MAX_TOKENS,
        "rounds": rounds,
        "engine_args": {**tiny.engine_args, **OVERRIDES},
        "mmrun_command": f"mmrun image -m {KEY} --model <tiny> --input manifest-ROUND.jsonl "
        f"-o out.jsonl [--server URL] {' '.join(common)} {' '.join(tiny.flags(**OVERRIDES))}",
        "server_ready_s": ready_s,
        "runs": runs,
        "in_process_per_s": median([r["prompts_per_s"] for r in runs["in_process"]]),
        "server_per_s": median([r["prompts_per_s"] for r in runs["server"]]),
        "paired_ratios": paired,
        "paired_ratio": median(paired),
        "in_process_first_line_s": median([r["first_line_s"] for r in runs["in_process"]]),
        # the first call against the server loads the model's processor to render its prompts;
        # the later ones find them rendered in the cache folder
        "server_first_call_first_line_s": runs["server"][0]["first_line_s"],
        "server_first_line_s": median([r["first_line_s"] for r in runs["server"][1:]])
        if rounds > 1
        else None,
        "prompt_tokens_equal": len({r["prompt_tokens"] for v in runs.values() for r in v}) == 1,
    }
