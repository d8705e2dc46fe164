"""`mmrun report`, `mmrun score`, `mmrun compare`: look at a run's results and score them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mmrun.cli._output import print_json, stderr_console, stdout_console
from mmrun.errors import EXIT_BELOW_THRESHOLD, UsageError

if TYPE_CHECKING:
    from mmrun.review.compare import Comparison
    from mmrun.review.score import Summary

ResultsArg = Annotated[
    Path,
    typer.Argument(
        help="A result file: the JSONL of a batch (-o), a --json document, or Parquet results.",
        show_default=False,
    ),
]
HtmlOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="The HTML file to write.", show_default=False, metavar="FILE"
    ),
]
LinkMediaOpt = Annotated[
    bool,
    typer.Option(
        "--link-media",
        help="Link media files by their path relative to the page instead of embedding "
        "thumbnails (for very large runs; the page then needs the files beside it).",
        metavar="",
    ),
]
MediaRootOpt = Annotated[
    Path | None,
    typer.Option(
        "--media-root",
        help="Folder that relative media paths are found in. Default: the result file's "
        "folder, then the current one.",
        show_default=False,
        metavar="DIR",
    ),
]
OpenOpt = Annotated[
    bool, typer.Option("--open", help="Open the page in the web browser.", metavar="")
]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed", help="Seed of the bootstrap resampling (the 95% intervals).", metavar="N"
    ),
]
NormalizeOpt = Annotated[
    str,
    typer.Option(
        "--normalize",
        help="Text normalization before wer, cer, exact and contains: whisper (Whisper's "
        "English normalizer), basic (lowercase, no punctuation, single spaces: jiwer's "
        "transforms) or none.",
        metavar="NAME",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout.", metavar="")
]


def _examples(*lines: str) -> str:
    return "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


REPORT_EXAMPLES = _examples(
    "mmrun report out.jsonl --open",
    "mmrun report out.jsonl -o big.html --link-media",
)
SCORE_EXAMPLES = _examples(
    "mmrun score out.jsonl -r meta.answer --metric exact --metric anls --in-place",
    "mmrun score transcripts.jsonl -r refs.csv --reference-field text --metric wer --fail-above 0.2",
    "mmrun score librispeech.jsonl -r LibriSpeech/test-clean --metric wer",
)
COMPARE_EXAMPLES = _examples(
    "mmrun compare base.jsonl tuned.jsonl -o compare.html",
    "mmrun compare base.jsonl tuned.jsonl --json | jq .metrics",
)


def _write_page(text: str, target: Path, open_it: bool) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot write {target}: {exc.strerror or exc}", hint="choose a writable -o path"
        ) from None
    size = len(text.encode())
    shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
    stderr_console().print(f"wrote {target} ({shown})", highlight=False)
    if open_it:
        _open_in_browser(target)


def _open_in_browser(page: Path) -> None:
    """Open the page in the web browser; with none to be found (a server, a container), say
    so and carry on: the page is written either way."""
    import webbrowser

    uri = page.resolve().as_uri()
    try:
        opened = webbrowser.open(uri)
    except webbrowser.Error:
        opened = False
    if not opened:
        stderr_console().print(
            f"mmrun: no web browser to open it with; open {uri} yourself", highlight=False
        )


def _check_normalize(name: str) -> None:
    from mmrun.review.score import NORMALIZERS

    if name not in NORMALIZERS:
        raise UsageError(
            f"unknown normalization {name!r}", hint=f"choose from {', '.join(NORMALIZERS)}"
        )


def _media_note(over_budget: int) -> None:
    if over_budget:
        stderr_console().print(
            f"mmrun: {over_budget} media linked rather than embedded (the page's media budget "
            "is spent); keep the media files beside the page",
            highlight=False,
        )


def report(
    results: ResultsArg,
    output: HtmlOutOpt = None,
    open_page: OpenOpt = False,
    link_media: LinkMediaOpt = False,
    media_root: MediaRootOpt = None,
) -> None:
    """Write one self-contained HTML page of a run's results, charts and media."""
    from mmrun.review.embed import MediaOptions
    from mmrun.review.load import load
    from mmrun.review.page import report_html

    loaded = load(results)
    target = output or loaded.path.with_suffix(".html")
    text, media = report_html(loaded, target, MediaOptions(link=link_media, root=media_root))
    _media_note(media.linked_over_budget)
    _write_page(text, target, open_page)


def score(
    results: ResultsArg,
    reference: Annotated[
        str,
        typer.Option(
            "--reference",
            "-r",
            help="Where the references are: a field of the result lines (a dotted path such "
            "as meta.answer), a JSONL, JSON, CSV, TSV or Parquet file keyed by id, or a folder "
            "of LibriSpeech *.trans.txt files.",
            show_default=False,
            metavar="REF",
        ),
    ],
    metric: Annotated[
        list[str],
        typer.Option(
            "--metric",
            help="Metric, repeatable: wer, cer, exact, contains, choice, anls, bleu, chrf.",
            show_default=False,
            metavar="METRIC",
        ),
    ],
    reference_field: Annotated[
        str,
        typer.Option(
            "--reference-field",
            help="The reference's field in a reference file (dotted path).",
            metavar="FIELD",
        ),
    ] = "reference",
    reference_id: Annotated[
        str,
        typer.Option("--reference-id", help="The id's field in a reference file.", metavar="FIELD"),
    ] = "id",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the result lines, each with its reference and score, to this JSONL file.",
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place",
            help="Keep the scores beside the results, in RESULTS.scores.jsonl (the result file "
            "itself is never rewritten); report and compare read them from there.",
            metavar="",
        ),
    ] = False,
    normalize: NormalizeOpt = "whisper",
    seed: SeedOpt = 0,
    fail_below: Annotated[
        float | None,
        typer.Option(
            "--fail-below",
            help=f"Exit with code {EXIT_BELOW_THRESHOLD} when a metric's mean is below this.",
            show_default=False,
            metavar="X",
        ),
    ] = None,
    fail_above: Annotated[
        float | None,
        typer.Option(
            "--fail-above",
            help=f"Exit with code {EXIT_BELOW_THRESHOLD} when a metric's mean is above this "
            "(for error rates: wer, cer).",
            show_default=False,
            metavar="X",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Score each answer against a reference and summarize each metric."""
    from mmrun.review import score as scoring
    from mmrun.review.load import load

    _check_normalize(normalize)
    unknown = [m for m in metric if m not in scoring.METRICS]
    if unknown:
        raise UsageError(
            f"unknown metric {unknown[0]!r}", hint=f"choose from {', '.join(scoring.METRICS)}"
        )
    if output is not None and in_place:
        raise UsageError("--output and --in-place exclude each other", hint="pick one")
    loaded = load(results)
    if output is not None and output.resolve() == loaded.path.resolve():
        raise UsageError(
            "--output names the result file itself, which mmrun never rewrites",
            hint="choose another -o, or --in-place",
        )
    refs = scoring.references(loaded, reference, reference_field, reference_id)
    transform, used = scoring.normalizer(normalize)
    if used != normalize:
        stderr_console().print(
            "mmrun: Whisper's normalizer is not installed, using the basic one "
            "(pip install 'mmrun[review]')",
            highlight=False,
        )
    summaries = scoring.score(loaded, refs, metric, normalize=transform, seed=seed)
    written = None
    if output is not None:
        scoring.write_scored(loaded, output)
        written = output
    elif in_place:
        written = scoring.write_sidecar(loaded)
    gated = fail_below is not None or fail_above is not None
    # A gate with nothing scored (every prompt failed) fails too: there is no mean to pass.
    below = [
        s.metric
        for s in summaries
        if (gated and s.mean is None)
        or (fail_below is not None and s.mean is not None and s.mean < fail_below)
        or (fail_above is not None and s.mean is not None and s.mean > fail_above)
    ]
    if json_out:
        print_json(
            {
                "schema": "mmrun.score/1",
                "results": str(loaded.path),
                "reference": reference,
                "normalize": used,
                "seed": seed,
                "output": None if written is None else str(written),
                "metrics": {s.metric: s.json() for s in summaries},
                "failed_threshold": below,
            }
        )
    else:
        _print_scores(summaries, used, written)
    if below:
        stderr_console().print(
            f"mmrun: {', '.join(below)} beyond the threshold (exit {EXIT_BELOW_THRESHOLD})",
            highlight=False,
        )
        raise typer.Exit(EXIT_BELOW_THRESHOLD)


def _print_scores(summaries: list[Summary], normalize: str, written: Path | None) -> None:
    from rich.table import Table

    table = Table(title=None, box=None, pad_edge=False)
    # Blank answers (no answer) get a column of their own in a run that has any.
    blanks = any(summary.blank for summary in summaries)
    names = ("metric", "mean", "95% CI", "corpus", "scored", "no reference", "failed")
    for name in (*names, "blank") if blanks else names:
        table.add_column(name, justify="left" if name == "metric" else "right")
    for summary in summaries:
        cells = [
            summary.metric,
            "-" if summary.mean is None else f"{summary.mean:.4f}",
            "-" if summary.low is None else f"[{summary.low:.4f}, {summary.high:.4f}]",
            "-" if summary.corpus is None else f"{summary.corpus:.4f}",
            str(summary.scored),
            str(summary.missing_reference),
            str(summary.failed),
        ]
        table.add_row(*cells, *([str(summary.blank)] if blanks else []))
    console = stdout_console()
    console.print(table)
    err = stderr_console()
    err.print(f"normalization: {normalize}", highlight=False)
    if written is not None:
        err.print(f"wrote {written}", highlight=False)


def compare(
    a: Annotated[Path, typer.Argument(help="The first run's result file.", show_default=False)],
    b: Annotated[Path, typer.Argument(help="The second run's result file.", show_default=False)],
    output: HtmlOutOpt = None,
    top: Annotated[
        int,
        typer.Option(
            "--top", help="How many of the most different items to list.", min=0, metavar="N"
        ),
    ] = 10,
    normalize: Annotated[
        str,
        typer.Option(
            "--normalize",
            help="Normalization before answers are compared: whisper, basic (lowercase, no "
            "punctuation, single spaces) or none.",
            metavar="NAME",
        ),
    ] = "basic",
    seed: SeedOpt = 0,
    link_media: LinkMediaOpt = False,
    media_root: MediaRootOpt = None,
    open_page: OpenOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Compare two runs over the same ids: agreement, score deltas, the answers that differ."""
    from mmrun.review import score as scoring
    from mmrun.review.compare import compare as run_compare
    from mmrun.review.load import load

    _check_normalize(normalize)
    transform, used = scoring.normalizer(normalize)
    comparison = run_compare(load(a), load(b), normalize=transform, seed=seed)
    if output is not None:
        from mmrun.review.embed import MediaOptions
        from mmrun.review.page import compare_html

        text, media = compare_html(
            comparison, output, MediaOptions(link=link_media, root=media_root), used
        )
        _media_note(media.linked_over_budget)
        _write_page(text, output, open_page)
    if json_out:
        print_json({**comparison.json(top), "normalize": used, "seed": seed})
        return
    _print_comparison(comparison, top, used)


def _blanks(c: Comparison) -> str:
    """``; blank answers: A 2, B 0`` where either run answered blanks (no answer, never equal)."""
    if not (c.blank_a or c.blank_b):
        return ""
    return f"; blank answers: A {c.blank_a}, B {c.blank_b}"


def _print_comparison(c: Comparison, top: int, normalize: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = stdout_console()
    console.print(f"[bold]A[/] {escape(str(c.a.path))}\n[bold]B[/] {escape(str(c.b.path))}")
    console.print(
        f"{len(c.common)} ids in both ({c.only_a} only in A, {c.only_b} only in B); "
        f"failed: A {c.failed_a}, B {c.failed_b}{_blanks(c)}"
    )
    if c.agreement is None:
        console.print("agreement: no id has an answer in both")
    else:
        console.print(
            f"agreement: {c.agreement:.1%} ({c.agree} of {c.both_ok} answer pairs equal "
            f"after {normalize} normalization)"
        )
    if c.deltas:
        table = Table(box=None, pad_edge=False)
        for name in ("metric", "A", "B", "B - A", "95% CI", "pairs"):
            table.add_column(name, justify="left" if name == "metric" else "right")
        for d in c.deltas:
            table.add_row(
                d.metric,
                f"{d.mean_a:.4f}",
                f"{d.mean_b:.4f}",
                f"{d.delta:+.4f}",
                "-" if d.low is None else f"[{d.low:+.4f}, {d.high:+.4f}]",
                str(d.paired),
            )
        console.print(table)
    if c.differ_most and top:
        rows_a, rows_b = c.a.by_id(), c.b.by_id()
        table = Table(
            title=f"most different ({min(top, len(c.differ_most))})",
            box=None,
            pad_edge=False,
            title_justify="left",
        )
        for name in ("id", "difference", "A", "B"):
            table.add_column(name, overflow="fold")
        for ident, gap in c.differ_most[:top]:
            table.add_row(
                escape(ident),
                f"{gap:.3f}",
                escape((rows_a[ident]["text"] or "")[:80]),
                escape((rows_b[ident]["text"] or "")[:80]),
            )
        console.print(table)
