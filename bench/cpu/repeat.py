"""Figure 5: the per-model work a second run could read from disk (the rendered prompt)."""

from __future__ import annotations

from typing import Any

from bench.cpu.common import PYTHON, WORKERS, bench_env, last_json_line, median, run_child
from bench.cpu.tiny import Tiny


def _render(tiny: Tiny, num_images: int, mode: str) -> dict[str, Any]:
    child = run_child(
        [PYTHON, str(WORKERS / "render.py"), str(tiny.path), str(num_images), mode], env=bench_env()
    )
    if child.returncode != 0:
        raise RuntimeError(f"render.py {mode} failed:\n{child.stderr[-3000:]}")
    return {"wall_s": child.wall_s, **last_json_line(child.stdout)}


def run(tiny: Tiny, num_images: int, processes: int = 2) -> dict[str, Any]:
    alone, after = [], []
    for _ in range(processes):  # alternating: first process, second process
        alone.append(_render(tiny, num_images, "alone"))
        after.append(_render(tiny, num_images, "after-vllm"))
    saving = median([a["load_processor_s"] + a["render_s"] for a in after])
    return {
        "num_images": num_images,
        "alone": alone,
        "after_vllm": after,
        # What a cached prompt would save: mmrun's load + render once vLLM's part is done.
        "saving_s": saving,
        # The same, end to end: both parts in mmrun's order minus both in vLLM's order.
        "order_difference_s": median([a["total_s"] for a in alone])
        - median([a["total_s"] for a in after]),
    }
