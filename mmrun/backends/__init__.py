"""Where a batch's engines run. Each backend takes the prompts still to do and gives every
outcome, exactly once, to the caller's sink as soon as it is known; a prompt whose engine is
lost before it finished goes back to the backend's queue, never to the caller.

- local: one engine in this process (also the dry run: the plan's engines, none started);
- replicas: ``-dp N`` engines, each in a process of its own on its own devices;
- ray: engine actors on a Ray cluster (``--backend ray``).

A new backend implements ``Backend`` and is chosen in ``backend_for``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from mmrun.item import Item
from mmrun.outcome import Hooks, Sink, Stats
from mmrun.plan import Plan


class Backend(Protocol):
    """Runs a batch's prompts; ``close`` stops what ``run`` left running (an engine kept up
    until the caller has written its results)."""

    name: str

    def run(self, items: Iterator[Item], emit: Sink, hooks: Hooks) -> Stats: ...

    def close(self) -> None: ...


def backend_for(plan: Plan, *, quiet: bool = False, verbose: bool = False) -> Backend:
    """The backend of a plan's engines; a dry run starts none, so it runs locally."""
    if plan.engines.layout and not plan.dry_run:
        from mmrun.backends.replicas import Replicas

        return Replicas(plan, quiet=quiet, verbose=verbose)
    if plan.engines.backend == "ray" and not plan.dry_run:
        from mmrun.backends.ray import RayBackend

        return RayBackend(plan, verbose=verbose)
    from mmrun.backends.local import LocalEngine

    return LocalEngine(plan)
