"""One engine in this process: the runner's batch loop, the engine kept up until the caller
has its results (its shutdown takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mmrun.item import Item
from mmrun.outcome import Hooks, Sink, Stats
from mmrun.plan import Plan
from mmrun.runner import run_engine_batch


class LocalEngine:
    name = "local"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._engine: Any = None

    def run(self, items: Iterator[Item], emit: Sink, hooks: Hooks) -> Stats:
        from mmrun.templates import HFTemplateRenderer

        stats, self._engine = run_engine_batch(
            self.plan, HFTemplateRenderer, emit, iter(items), hooks=hooks
        )
        return stats

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
