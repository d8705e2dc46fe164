"""Which rows of an input a run takes: ``--shard I/N`` (every N-th row, starting at row I) and
``--limit N`` (at most N prompts), by the row's place in the input, so that a shard's ids are
the same in every run and the shards of one input add up to all of it."""

from __future__ import annotations

from dataclasses import dataclass

from mmrun.errors import UsageError


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
