"""The tiny Qwen2.5-VL checkpoint (built once per run) and the mmrun command line around it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cpu.common import BIN, PYTHON, bench_env, last_json_line, run_child

KEY = "qwen2_5_vl"


@dataclass
class Tiny:
    path: Path
    engine_args: dict[str, Any]  # the checkpoint's CPU args plus enforce_eager
    build_s: float

    def flags(self, **overrides: Any) -> list[str]:
        flags = []
        for key, value in {**self.engine_args, **overrides}.items():
            flags += ["--engine-arg", f"{key}={json.dumps(value)}"]
        return flags

    def mmrun(self, *args: str, **overrides: Any) -> list[str]:
        return [
            str(BIN / "mmrun"),
            "image",
            "-m",
            KEY,
            "--model",
            str(self.path),
            *self.flags(**overrides),
            *args,
        ]


def build(tmp: Path) -> Tiny:
    """Build it in a child process (the builder imports torch and transformers)."""
    code = (
        "import json, sys, time; from pathlib import Path; from mmrun.tiny import selftest_builders as builders\n"
        "t = time.perf_counter()\n"
        f"ck = builders()[('image', {KEY!r})](Path(sys.argv[1]))\n"
        "print(json.dumps({'engine_args': dict(ck.engine_args), 's': time.perf_counter() - t}))\n"
    )
    child = run_child([PYTHON, "-c", code, str(tmp / "tiny-qwen2_5_vl")], env=bench_env())
    if child.returncode != 0:
        raise RuntimeError(f"building the tiny checkpoint failed:\n{child.stderr[-3000:]}")
    out = last_json_line(child.stdout)
    return Tiny(tmp / "tiny-qwen2_5_vl", {**out["engine_args"], "enforce_eager": True}, out["s"])
