"""One self-contained HTML page for a run (``mmrun report``) or two (``mmrun compare``).

Everything is inline: the styles, the script, the charts (matplotlib, as SVG), the data (one
JSON blob) and the media (thumbnails, short audio clips, video keyframes, as data URIs; a
URL's from the copy in mmrun's media cache, never fetched), so the page works offline and can
be mailed. The script draws only the current page's cards, so
a page of 100,000 items stays fast. ``--link-media`` (or a run whose media exceed the
embedding budget) links media files by a path relative to the page instead.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import html
import io
import itertools
import json
import os
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.review.load import Results

if TYPE_CHECKING:
    from mmrun.review.compare import Comparison

PAGE_SIZE = 50
THUMBNAIL_PX = 320  # the longer side of an embedded image
AUDIO_SECONDS = 15.0  # an embedded clip is cut to this long (mono Ogg Vorbis)
VIDEO_FRAMES = 4
EMBED_BUDGET_MB = 256.0  # media beyond this are linked, not embedded

_IMAGE = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"}
_AUDIO = {".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".au", ".caf"}
_VIDEO = {".mp4", ".avi", ".mov", ".mkv", ".webm"}


@dataclass(frozen=True)
class MediaOptions:
    link: bool = False
    root: Path | None = None
    budget_mb: float = EMBED_BUDGET_MB


# --- media --------------------------------------------------------------------------------


def _kind(name: str, modality: str | None) -> str:
    suffix = Path(urllib.parse.urlparse(name).path if "://" in name else name).suffix.lower()
    if suffix in _IMAGE:
        return "image"
    if suffix in _AUDIO:
        return "audio"
    if suffix in _VIDEO:
        return "video"
    if name.startswith("data:"):
        return name[5:].split("/", 1)[0] or "image"
    return modality if modality in ("image", "audio", "video") else "image"


def _resolve(source: str, roots: Sequence[Path]) -> Path | None:
    path = Path(source).expanduser()
    candidates = [path] if path.is_absolute() else [root / path for root in roots]
    return next((c for c in candidates if c.is_file()), None)


def _cached(url: str) -> Path | None:
    """The file mmrun's downloader keeps for ``url`` in its media cache, if it is there."""
    from mmrun.media.download import cache_path

    path = cache_path(url)
    return path if path.is_file() else None


def _data_bytes(source: str) -> bytes | None:
    header, _, payload = source.partition(",")
    try:
        if header.endswith(";base64"):
            return base64.b64decode(payload)
        return urllib.parse.unquote_to_bytes(payload)
    except ValueError:
        return None


def _uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def thumbnail(data: bytes) -> str:
    """A JPEG data URI of the image, its longer side at most THUMBNAIL_PX."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (THUMBNAIL_PX, THUMBNAIL_PX))  # JPEG: decode at a reduced size
        small = ImageOps.exif_transpose(image).convert("RGB")
        small.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
        out = io.BytesIO()
        small.save(out, "JPEG", quality=75)
    return _uri("image/jpeg", out.getvalue())


def audio_clip(data: bytes) -> str:
    """An Ogg Vorbis data URI of the clip's first AUDIO_SECONDS, mixed down to mono."""
    import soundfile

    with soundfile.SoundFile(io.BytesIO(data)) as clip:
        samples = clip.read(frames=int(AUDIO_SECONDS * clip.samplerate), dtype="float32")
        rate = clip.samplerate
    if samples.ndim > 1:
        samples = samples.mean(axis=1)
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="OGG", subtype="VORBIS")
    return _uri("audio/ogg", out.getvalue())


def keyframes(path: Path) -> list[str]:
    """VIDEO_FRAMES frames spread over the clip, as JPEG thumbnails (OpenCV)."""
    import cv2

    from mmrun.capture import library_output

    frames = []
    with library_output():
        capture = cv2.VideoCapture(str(path))
        try:
            count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            for i in range(VIDEO_FRAMES):
                capture.set(cv2.CAP_PROP_POS_FRAMES, (2 * i + 1) * count // (2 * VIDEO_FRAMES))
                ok, frame = capture.read()
                if ok:
                    ok, jpeg = cv2.imencode(".jpg", frame)
                    if ok:
                        frames.append(thumbnail(jpeg.tobytes()))
        finally:
            capture.release()
    return frames


class MediaTable:
    """Each distinct media source once: embedded, linked, or noted as unavailable."""

    def __init__(
        self, options: MediaOptions, roots: Sequence[Path], page_dir: Path, modality: str | None
    ) -> None:
        self.options = options
        self.roots = roots
        self.page_dir = page_dir
        self.modality = modality
        self.entries: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.embedded_bytes = 0
        self.linked_over_budget = 0

    def key(self, source: str) -> str:
        found = self.keys.get(source)
        if found is None:
            found = self.keys[source] = f"m{len(self.keys)}"
            self.entries[found] = self._entry(source)
        return found

    def _entry(self, source: str) -> dict[str, Any]:
        kind = _kind(source, self.modality)
        name = source if not source.startswith("data:") else f"inline {kind}"
        entry: dict[str, Any] = {"kind": kind, "name": name[:200]}
        over = self.embedded_bytes > self.options.budget_mb * 2**20
        if source.startswith(("http://", "https://")):
            # What mmrun downloaded is in its cache: embedded from there, never fetched here.
            path = _cached(source)
            if path is None:
                return {**entry, "kind": "link", "src": source, "note": "not in mmrun's cache"}
            if self.options.link or over:
                self.linked_over_budget += over
                return {**entry, "kind": "link", "src": source, "note": "remote, not embedded"}
            entry["note"] = "from mmrun's cache"
        else:
            path = None if source.startswith("data:") else _resolve(source, self.roots)
        if path is None and not source.startswith("data:"):
            return {**entry, "kind": "link", "src": None, "note": "file not found"}
        if path is not None and (self.options.link or over):
            self.linked_over_budget += over
            relative = os.path.relpath(path.resolve(), self.page_dir.resolve())
            return {**entry, "src": urllib.parse.quote(Path(relative).as_posix()), "linked": True}
        try:
            data = path.read_bytes() if path is not None else _data_bytes(source)
            if data is None:
                raise ValueError("bad data URI")
            if kind == "image":
                entry["src"] = thumbnail(data)
            elif kind == "audio":
                entry["src"] = audio_clip(data)
            elif kind == "video" and path is not None:
                entry["frames"] = keyframes(path)
            else:
                raise ValueError(f"cannot embed {kind}")
        except Exception as exc:  # an unreadable file is noted on its card, the page goes on
            src = source if source.startswith(("http://", "https://")) else None
            return {**entry, "kind": "link", "src": src, "note": f"not embedded: {exc}"[:200]}
        self.embedded_bytes += len(entry.get("src", "")) + sum(map(len, entry.get("frames", [])))
        return entry


# --- charts -------------------------------------------------------------------------------


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
    width = max(active / _BINS, 0.001)
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
                f"{_per_second(bins.results / bins.active_s)} per second; bins of about {_span(bins.width)}{cut}",
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
