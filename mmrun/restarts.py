"""What a batch does when its engine dies: which prompts go back to the queue, which run alone,
which one is given up as the cause, and when to stop restarting.

The rules (docs/usage.md, "When things fail"):

- The prompts in the engine when it died go back to the queue, ahead of the rest; results
  already written stay.
- A prompt that was in the engine at two deaths is a suspect: it runs alone, one suspect at a
  time. A suspect that was alone in the engine at two deaths is the cause: it becomes an error
  line (stage "engine") and the batch goes on without it. Two deaths alone, not one, so that a
  death from outside (the OOM killer, a driver reset) never blames the prompt that happened to
  run alone then.
- ``limit`` (``--max-restarts``) bounds the restarts in a row without a result in between: an
  engine that crashes once an hour over a night's run keeps going, one that dies at every
  start stops after ``limit`` restarts. A death that convicts a prompt is not counted: the run
  lost nothing but that prompt.

Nothing here starts or stops an engine (mmrun.runner does); nothing imports vLLM.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field

from mmrun.errors import EngineError
from mmrun.prefetch import Ready

DEFAULT_MAX_RESTARTS = 3
# Deaths with a prompt alone in the engine before that prompt is taken for the cause.
DEATHS_ALONE = 2
# Seconds before the k-th restart in a row (doubling, at most BACKOFF_MAX_S): a driver or a
# device that is resetting gets a moment, a one-off crash costs one second.
BACKOFF_S = 1.0
BACKOFF_MAX_S = 30.0


class EngineLost(Exception):
    """The engine died while prompts were in it (raised by the runner's loop)."""

    def __init__(self, error: EngineError, in_flight: Sequence[Ready]) -> None:
        super().__init__(str(error))
        self.error = error
        self.in_flight = list(in_flight)


@dataclass
class Verdict:
    """After a death: the prompts to put back (suspects first), the one given up as the cause
    (or none), and the wait before the restart."""

    requeue: list[Ready]
    convicted: list[Ready]
    backoff_s: float
    restart: int  # this restart's number in a row without a result (0: not counted)


@dataclass
class Restarts:
    """The restart policy of one engine over a batch."""

    limit: int = DEFAULT_MAX_RESTARTS
    total: int = 0
    in_a_row: int = 0
    suspects: set[str] = field(default_factory=set)
    _deaths: collections.Counter[str] = field(default_factory=collections.Counter)
    _alone: collections.Counter[str] = field(default_factory=collections.Counter)

    def progressed(self) -> None:
        """A prompt finished: the engine works, the next death starts a new count."""
        self.in_a_row = 0

    def alone(self, item_id: str) -> bool:
        """Whether this prompt must run alone in the engine."""
        return item_id in self.suspects

    def died(self, lost: EngineLost) -> Verdict:
        """What to do after a death; raises the engine's error (with the count) past the limit."""
        ids = [ready.item.id for ready in lost.in_flight]
        convicted: list[Ready] = []
        if len(ids) == 1:
            self._alone[ids[0]] += 1
            if self._alone[ids[0]] >= DEATHS_ALONE:
                convicted = list(lost.in_flight)
                self.suspects.discard(ids[0])
        for item_id in ids:
            self._deaths[item_id] += 1
            if self._deaths[item_id] >= 2 and not convicted:
                self.suspects.add(item_id)
        if not convicted:
            self.in_a_row += 1
            if self.in_a_row > self.limit:
                raise self._given_up(lost.error)
        self.total += 1
        requeue = [ready for ready in lost.in_flight if not convicted]
        requeue.sort(key=lambda ready: ready.item.id not in self.suspects)
        backoff = min(BACKOFF_S * 2 ** max(self.in_a_row - 1, 0), BACKOFF_MAX_S)
        return Verdict(requeue, convicted, backoff, self.in_a_row if not convicted else 0)

    def _given_up(self, error: EngineError) -> EngineError:
        if not self.limit:
            return error
        return EngineError(
            f"{error.message} (the engine died {self.in_a_row} times in a row without "
            f"finishing a prompt; --max-restarts {self.limit})",
            hint=error.hint or "run the same command again to resume",
        )
