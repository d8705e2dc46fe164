"""Compare two runs over the same ids: how often their answers agree, how their scores
differ (with a paired bootstrap interval), and the items where they differ most.

A blank answer (empty, or only whitespace) is no answer: two runs that both answered blanks
do not agree; the blanks are counted on their own."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mmrun.errors import UsageError
from mmrun.review.load import Results, is_blank
from mmrun.review.score import LOWER_IS_BETTER, bootstrap


@dataclass
class MetricDelta:
    """B's mean minus A's over the ids both scored, with its paired 95% interval."""

    metric: str
    paired: int
    mean_a: float
    mean_b: float
    delta: float
    low: float | None
    high: float | None

    def json(self) -> dict[str, Any]:
        return {
            "paired": self.paired,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "delta": self.delta,
            "ci95": None if self.low is None else [self.low, self.high],
            "lower_is_better": self.metric in LOWER_IS_BETTER,
        }


@dataclass
class Comparison:
    a: Results
    b: Results
    common: list[str]
    only_a: int
    only_b: int
    both_ok: int
    agree: int
    failed_a: int
    failed_b: int
    blank_a: int = 0
    blank_b: int = 0
    deltas: list[MetricDelta] = field(default_factory=list)
    # (id, how much the two differ: 0-1 for texts, the score gap when scored)
    differ_most: list[tuple[str, float]] = field(default_factory=list)

    @property
    def agreement(self) -> float | None:
        return self.agree / self.both_ok if self.both_ok else None

    def json(self, top: int) -> dict[str, Any]:
        a, b = self.a.by_id(), self.b.by_id()
        return {
            "schema": "mmrun.compare/1",
            "a": str(self.a.path),
            "b": str(self.b.path),
            "common": len(self.common),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "failed_a": self.failed_a,
            "failed_b": self.failed_b,
            "blank_a": self.blank_a,
            "blank_b": self.blank_b,
            "both_ok": self.both_ok,
            "agree": self.agree,
            "agreement": self.agreement,
            "metrics": {d.metric: d.json() for d in self.deltas},
            "differ_most": [
                {"id": i, "difference": d, "a": a[i]["text"], "b": b[i]["text"]}
                for i, d in self.differ_most[:top]
            ],
        }


def compare(
    a: Results, b: Results, *, normalize: Callable[[str], str], seed: int, resamples: int = 1000
) -> Comparison:
    """Agreement, score deltas and the ids ranked by how much A and B differ."""
    from rapidfuzz.distance import Levenshtein

    rows_a, rows_b = a.by_id(), b.by_id()
    common = [i for i in rows_a if i in rows_b]
    if not common:
        raise UsageError(
            f"{a.path.name} and {b.path.name} share no id",
            hint="compare two runs over the same inputs",
        )
    both_ok = agree = failed_a = failed_b = blank_a = blank_b = 0
    text_gap: dict[str, float] = {}
    for ident in common:
        ra, rb = rows_a[ident], rows_b[ident]
        failed_a += ra["error"] is not None
        failed_b += rb["error"] is not None
        blank_a += is_blank(ra)
        blank_b += is_blank(rb)
        if _answered(ra) and _answered(rb):
            both_ok += 1
            na, nb = normalize(ra["text"]), normalize(rb["text"])
            agree += na == nb
            text_gap[ident] = float(Levenshtein.normalized_distance(na, nb))
    metrics = sorted(
        {m for r in rows_a.values() for m in (r["score"] or {})}
        & {m for r in rows_b.values() for m in (r["score"] or {})}
    )
    deltas, score_gap = [], {}
    for metric in metrics:
        pairs = [
            (rows_a[i]["score"][metric], rows_b[i]["score"][metric])
            for i in common
            if (rows_a[i]["score"] or {}).get(metric) is not None
            and (rows_b[i]["score"] or {}).get(metric) is not None
        ]
        if not pairs:
            continue
        diffs = [sb - sa for sa, sb in pairs]
        # The paired bootstrap: resampling ids keeps each A score with its B score.
        interval = bootstrap(diffs, seed=seed, resamples=resamples)
        deltas.append(
            MetricDelta(
                metric,
                len(pairs),
                math.fsum(p[0] for p in pairs) / len(pairs),
                math.fsum(p[1] for p in pairs) / len(pairs),
                math.fsum(diffs) / len(diffs),
                interval[0] if interval else None,
                interval[1] if interval else None,
            )
        )
        if len(deltas) == 1:  # the first metric ranks the items
            for i in common:
                sa = (rows_a[i]["score"] or {}).get(metric)
                sb = (rows_b[i]["score"] or {}).get(metric)
                if sa is not None and sb is not None:
                    score_gap[i] = abs(sb - sa)
    gap = score_gap or text_gap
    ranked = sorted(gap.items(), key=lambda item: (-item[1], item[0]))
    return Comparison(
        a,
        b,
        common,
        only_a=len(rows_a) - len(common),
        only_b=len(rows_b) - len(common),
        both_ok=both_ok,
        agree=agree,
        failed_a=failed_a,
        failed_b=failed_b,
        blank_a=blank_a,
        blank_b=blank_b,
        deltas=deltas,
        differ_most=[(i, d) for i, d in ranked if d > 0],
    )


def _answered(row: dict[str, Any]) -> bool:
    """An answer to compare: no error, and text that is not blank."""
    return row["error"] is None and row["text"] is not None and not is_blank(row)
