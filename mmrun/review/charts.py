"""The charts of a review page: throughput over the run and histograms (output lengths,
scores), drawn with matplotlib as inline SVG, the same data giving the same bytes."""

from __future__ import annotations

import contextlib
import datetime
import html
import io
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmrun.review.load import Results


def _svg(figure: Any) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    text = out.getvalue()
    # The RDF block only names the producer and a date: a page differs by nothing but its data.
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    return text[text.index("<svg") :]


def _chart(title: str, xlabel: str, ylabel: str, draw: Callable[[Any], object]) -> str:
    """A small chart as an inline SVG: ``draw`` fills the axes (matplotlib, no pyplot state,
    text as paths: no font needed on the reader's side)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    # A fixed salt: the same data, the same page.
    with rc_context({"svg.fonttype": "path", "svg.hashsalt": "mmrun"}):
        figure = Figure(figsize=(4.6, 2.6), dpi=100)
        axes = figure.add_subplot()
        draw(axes)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel(xlabel, fontsize=9)
        axes.set_ylabel(ylabel, fontsize=9)
        axes.tick_params(labelsize=8)
        axes.spines[["top", "right"]].set_visible(False)
        return _svg(figure)


def histogram(values: Sequence[float], title: str, xlabel: str) -> str:
    """A histogram as an inline SVG."""
    bins = min(40, max(5, len(set(values))))
    return _chart(title, xlabel, "items", lambda axes: axes.hist(values, bins, color="#2e5aac"))


def finish_times(rows: Iterable[Mapping[str, Any]]) -> list[float]:
    """The lines' ``finished_at`` as seconds since the epoch, sorted (lines without one, as
    written before the field existed, are left out)."""
    times = []
    for row in rows:
        value = row.get("finished_at")
        with contextlib.suppress(TypeError, ValueError):
            if isinstance(value, int | float) and not isinstance(value, bool):
                times.append(float(value))
            elif isinstance(value, str):
                moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=datetime.timezone.utc)
                times.append(moment.timestamp())
    return sorted(times)


@dataclass(frozen=True)
class Throughput:
    """Results per second in time bins over a run. A pause longer than PAUSE_S between two
    results (a resumed run's restart, a stall) is cut out of the time axis: ``pauses`` holds
    where each cut is on that axis and how long it was. Each stretch between pauses is split
    into equal bins of about ``width`` seconds, so no bin is cut short by a pause or the end."""

    width: float  # the bin width aimed at, in seconds (a stretch's bins are within rounding)
    starts: list[float]  # each bin's start, in seconds on the cut axis
    widths: list[float]  # each bin's width: equal within a stretch
    rates: list[float]  # results per second in each bin
    pauses: list[tuple[float, float]]  # (where on the axis, how long)
    results: int
    active_s: float  # the axis' length: first to last result, pauses cut out


PAUSE_S = 300.0
_BINS = 40
# Bins of at least a second: vLLM finishes the prompts of a step together, so a bin of a few
# milliseconds that holds one step's results would draw a rate tens of times the run's (a peak
# of 650/s in a run of 21.5/s on average).
_MIN_BIN_S = 1.0


def throughput(times: Sequence[float]) -> Throughput | None:
    """Bins of ``times`` (sorted, seconds); None for fewer than two distinct moments."""
    if len(times) < 2 or times[0] == times[-1]:
        return None
    stretches: list[list[float]] = [[times[0]]]
    for before, now in itertools.pairwise(times):
        if now - before > PAUSE_S:
            stretches.append([])
        stretches[-1].append(now)
    active = sum(stretch[-1] - stretch[0] for stretch in stretches)
    width = max(active / _BINS, _MIN_BIN_S)
    starts: list[float] = []
    widths: list[float] = []
    rates: list[float] = []
    pauses: list[tuple[float, float]] = []
    base = 0.0
    for number, stretch in enumerate(stretches):
        if number:
            pauses.append((base, stretch[0] - stretches[number - 1][-1]))
        length = stretch[-1] - stretch[0]
        bins = max(1, round(length / width))
        step = length / bins if length > 0 else width
        counts = Counter(min(bins - 1, int((t - stretch[0]) / step)) for t in stretch)
        for slot in range(bins):
            starts.append(base + slot * step)
            widths.append(step)
            rates.append(counts.get(slot, 0) / step)
        base += bins * step
    return Throughput(width, starts, widths, rates, pauses, len(times), active)


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.3g} s"


def _per_second(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def throughput_chart(bins: Throughput) -> str:
    """Results per second over the run, as an inline SVG; each pause cut out is a dashed line."""

    def draw(axes: Any) -> None:
        axes.bar(bins.starts, bins.rates, width=bins.widths, align="edge", color="#2e5aac")
        top = max(bins.rates)
        axes.set_ylim(0, top * 1.2)  # room for the pauses' labels above the bars
        for where, gap in bins.pauses:
            axes.axvline(where, color="#a33", linestyle="--", linewidth=1)
            axes.annotate(
                f"paused {_span(gap)}",
                (where, top * 1.18),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=7,
                color="#a33",
                va="top",
            )

    xlabel = "seconds since the first result" + (", pauses cut out" if bins.pauses else "")
    return _chart("Throughput over the run", xlabel, "results/s", draw)


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def charts(results: Results, metrics: Sequence[str]) -> list[str]:
    done = [r for r in results.rows if r["error"] is None and r["completion_tokens"] is not None]
    figures = []
    bins = throughput(finish_times(results.rows))
    if bins is not None:
        pauses = len(bins.pauses)
        cut = (
            f"; {pauses} pause{'s' if pauses > 1 else ''} longer than {_span(PAUSE_S)} cut out"
            if pauses
            else ""
        )
        figures.append(
            _figure(
                throughput_chart(bins),
                f"{bins.results} results in {_span(bins.active_s)}, "
                f"{_per_second(bins.results / bins.active_s)} per second on average, "
                f"{_per_second(max(bins.rates))} in the busiest bin; bins of about "
                f"{_span(bins.width)}{cut}",
            )
        )
    if done:
        lengths = [float(r["completion_tokens"]) for r in done]
        figures.append(
            _figure(
                histogram(lengths, "Output length", "generated tokens"),
                f"{len(done)} answers, median {sorted(lengths)[len(lengths) // 2]:.0f} tokens",
            )
        )
    for metric in metrics:
        values = [
            float(r["score"][metric])
            for r in results.rows
            if r["score"] and r["score"].get(metric) is not None
        ]
        if values:
            figures.append(
                _figure(
                    histogram(values, f"Scores: {metric}", metric),
                    f"{len(values)} items scored, mean {sum(values) / len(values):.4g}",
                )
            )
    return figures
