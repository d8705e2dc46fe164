"""Which rows of an input a run takes: ``--shard I/N`` (every N-th row, starting at row I) and
``--limit N`` (at most N prompts), by the row's place in the input, so that a shard's ids are
the same in every run and the shards of one input add up to all of it. The prompts named on
the command line (a folder's files, sorted; a pattern's matches, sorted) are rows too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from mmrun.errors import UsageError

_T = TypeVar("_T")


@dataclass(frozen=True)
class Selection:
    limit: int | None = None
    shard: int = 0
    shards: int = 1

    def keeps(self, index: int) -> bool:
        """Whether row ``index`` (0-based) belongs to this shard; the limit is the caller's."""
        return index % self.shards == self.shard

    def count(self, rows: int) -> int:
        """How many prompts a run over ``rows`` rows takes."""
        taken = len(range(self.shard, rows, self.shards))
        return taken if self.limit is None else min(taken, self.limit)

    def take(self, rows: Sequence[_T]) -> list[_T]:
        """The rows of ``rows`` this selection takes, in their order."""
        kept = [row for index, row in enumerate(rows) if self.keeps(index)]
        return kept if self.limit is None else kept[: self.limit]


def selection_of(limit: int | None, shard: str | None) -> Selection:
    """``--limit`` and ``--shard`` as a Selection; one line (exit 2) for a bad value."""
    index, shards = parse_shard(shard)
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    return Selection(limit, index, shards)


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"I/N"`` as (I, N), with 0 <= I < N."""
    if text is None:
        return 0, 1
    first, sep, second = text.partition("/")
    try:
        shard, shards = int(first), int(second)
    except ValueError:
        shard, shards = -1, 0
    if not sep or shards < 1 or not 0 <= shard < shards:
        raise UsageError(
            f"invalid --shard {text!r}", hint="write I/N with 0 <= I < N, e.g. --shard 0/4"
        )
    return shard, shards
