"""One self-contained HTML page for a run (``mmrun report``) or two (``mmrun compare``).

Everything is inline: the styles, the script, the charts (matplotlib, as SVG), the data (one
JSON blob) and the media (thumbnails, short audio clips, video keyframes, as data URIs; a
URL's from the copy in mmrun's media cache, never fetched), so the page works offline and can
be mailed. The script draws only the current page's cards, so a page of 100,000 items stays
fast. ``--link-media`` (or a run whose media exceed the embedding budget) links media files by
a path relative to the page instead.

This module assembles the page: the summary table, the items and the template. The charts are
mmrun.review.charts', the media mmrun.review.embed's.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.review.charts import charts
from mmrun.review.embed import MediaOptions, MediaTable
from mmrun.review.load import Results

if TYPE_CHECKING:
    from mmrun.review.compare import Comparison

PAGE_SIZE = 50


# --- summary ------------------------------------------------------------------------------


def metric_names(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        for name, value in (row["score"] or {}).items():
            if value is not None:
                names.setdefault(name)
    return list(names)


def facts(results: Results, metrics: Sequence[str]) -> list[tuple[str, str]]:
    """The summary table: what ran, how much, what failed where, tokens, scores."""
    rows, run = results.rows, results.run
    failed = Counter(r["error"]["stage"] for r in rows if r["error"] is not None)
    done = [r for r in rows if r["error"] is None]
    prompt_tokens = sum(r["prompt_tokens"] or 0 for r in done)
    output_tokens = sum(r["completion_tokens"] or 0 for r in done)
    table = []
    if run.get("key") or run.get("model"):
        table.append(("model", f"{run.get('key') or ''} ({run.get('model') or ''})".strip()))
    if run.get("modality"):
        table.append(("modality, method", f"{run['modality']}, {run.get('method') or ''}"))
    questions = Counter(r["question"] for r in rows if r["question"])
    if questions:
        common, count = questions.most_common(1)[0]
        others = len(questions) - 1
        more = f" (and {others} other question{'s' if others > 1 else ''})" if others else ""
        table.append(
            (
                "question",
                f"{common}{more}" if count > 1 or len(rows) == 1 else f"{len(questions)} questions",
            )
        )
    by_stage = ", ".join(f"{n} {stage}" for stage, n in failed.most_common())
    table.append(
        (
            "prompts",
            f"{len(rows)}: {len(done)} done, {len(rows) - len(done)} failed"
            + (f" ({by_stage})" if by_stage else ""),
        )
    )
    table.append(("prompt tokens", f"{prompt_tokens:,}"))
    table.append(
        (
            "output tokens",
            f"{output_tokens:,}"
            + (f" ({output_tokens / len(done):.1f} per answer)" if done else ""),
        )
    )
    reasons = Counter(r["finish_reason"] for r in done if r["finish_reason"])
    if reasons:
        table.append(("finish reasons", ", ".join(f"{n} {k}" for k, n in reasons.most_common())))
    replicas = {r["replica"] for r in rows if r["replica"] is not None}
    if replicas:
        table.append(("replicas", str(len(replicas))))
    timings = results.timings
    if timings.get("total_s"):
        table.append(("duration", f"{timings['total_s']:.1f} s"))
        generate = timings.get("generate_s") or timings["total_s"]
        table.append(
            (
                "throughput",
                f"{len(done) / generate:.2f} prompts/s, {output_tokens / generate:.1f} output tokens/s (generation)",
            )
        )
    elif results.last_run_s is not None:
        # A batch has no overall timings: its last run started when it wrote FILE.mmrun.json,
        # and ended (about) when it last wrote the file.
        table.append(
            (
                "last run",
                f"{results.last_run_s:.0f} s from its start to its last line (engine start included)",
            )
        )
    means = []
    for metric in metrics:
        values = [r["score"][metric] for r in rows if (r["score"] or {}).get(metric) is not None]
        if values:
            means.append(f"{metric} {sum(values) / len(values):.4g} ({len(values)} items)")
    if means:
        table.append(("mean scores", " · ".join(means)))
    if results.torn_last_line:
        table.append(
            ("note", "the last line was cut off (a run killed while writing it) and is left out")
        )
    return table


def _facts_html(table: Sequence[tuple[str, str]]) -> str:
    cells = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in table
    )
    return f'<table class="facts">{cells}</table>'


# --- items and the page -------------------------------------------------------------------


def _item(row: Mapping[str, Any], media: MediaTable) -> dict[str, Any]:
    return {
        "id": row["id"],
        "index": row["index"],
        "question": row["question"],
        "text": row["text"],
        "parsed": row["parsed"],
        "error": row["error"],
        "score": {k: v for k, v in (row["score"] or {}).items() if v is not None} or None,
        "reference": row["reference"],
        "meta": row["meta"],
        "tokens": row["completion_tokens"],
        "finish": row["finish_reason"],
        "replica": row["replica"],
        "media": [media.key(str(s)) for s in row["media"]],
    }


def _roots(results: Results, options: MediaOptions) -> list[Path]:
    roots = [results.path.parent, Path.cwd()]
    return [options.root, *roots] if options.root is not None else roots


def _page(
    title: str, subtitle: str, summary: str, figures: Sequence[str], data: Mapping[str, Any]
) -> str:
    template = resources.files("mmrun.review").joinpath("templates/page.html").read_text("utf-8")
    # Inside <script>, "</" would end the element: JSON allows "\/" for "/".
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    blob = blob.replace("</", "<\\/").replace("<!--", "<\\!--")
    return (
        template.replace("__MMRUN_TITLE__", html.escape(title))
        .replace("__MMRUN_SUBTITLE__", html.escape(subtitle))
        .replace("__MMRUN_SUMMARY__", summary)
        .replace("__MMRUN_CHARTS__", "".join(figures))
        .replace("__MMRUN_DATA__", blob)
    )


def report_html(results: Results, page: Path, options: MediaOptions) -> tuple[str, MediaTable]:
    """The page for one run, and what became of its media."""
    metrics = metric_names(results.rows)
    media = MediaTable(options, _roots(results, options), page.parent, results.run.get("modality"))
    items = [_item(row, media) for row in results.rows]
    data = {
        "mode": "report",
        "items": items,
        "media": media.entries,
        "metrics": metrics,
        "page_size": PAGE_SIZE,
    }
    title = f"mmrun report: {results.path.name}"
    return _page(
        title,
        str(results.path),
        _facts_html(facts(results, metrics)),
        charts(results, metrics),
        data,
    ), media


def compare_html(
    comparison: Comparison, page: Path, options: MediaOptions, normalize_name: str
) -> tuple[str, MediaTable]:
    """The page of ``mmrun compare``: both answers side by side, the most different first."""
    a, b = comparison.a, comparison.b
    rows_b = b.by_id()
    media = MediaTable(options, _roots(a, options), page.parent, a.run.get("modality"))
    rank = {ident: i for i, (ident, _) in enumerate(comparison.differ_most)}
    gap = dict(comparison.differ_most)
    rows_a = a.by_id()
    ordered = sorted(comparison.common, key=lambda i: (rank.get(i, len(rank)), rows_a[i]["index"]))
    items = []
    for position, ident in enumerate(ordered):
        item = _item(rows_a[ident], media)
        other = rows_b[ident]
        item["index"] = position
        item["diff"] = gap.get(ident)
        item["b"] = {
            "text": other["text"],
            "error": other["error"],
            "parsed": other["parsed"],
            "score": {k: v for k, v in (other["score"] or {}).items() if v is not None} or None,
        }
        items.append(item)
    agreement = comparison.agreement
    table = [
        ("A", str(a.path)),
        ("B", str(b.path)),
        (
            "ids in both",
            f"{len(comparison.common)} ({comparison.only_a} only in A, {comparison.only_b} only in B)",
        ),
        ("failed", f"A {comparison.failed_a}, B {comparison.failed_b}"),
        ("blank answers", f"A {comparison.blank_a}, B {comparison.blank_b}"),
        (
            "agreement",
            "no pair of answers"
            if agreement is None
            else f"{agreement:.1%} ({comparison.agree} of {comparison.both_ok} answer pairs equal after {normalize_name} normalization)",
        ),
    ]
    for d in comparison.deltas:
        interval = "" if d.low is None else f", 95% CI [{d.low:+.4g}, {d.high:+.4g}]"
        table.append(
            (
                f"{d.metric}: B - A",
                f"{d.delta:+.4g} ({d.mean_a:.4g} -> {d.mean_b:.4g}, {d.paired} pairs{interval})",
            )
        )
    data = {
        "mode": "compare",
        "items": items,
        "media": media.entries,
        "metrics": metric_names(rows_a[i] for i in comparison.common),
        "page_size": PAGE_SIZE,
        "names": [a.path.name, b.path.name],
    }
    title = f"mmrun compare: {a.path.name} vs {b.path.name}"
    return _page(
        title, "cards in order of difference, largest first", _facts_html(table), [], data
    ), media
