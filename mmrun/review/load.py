"""Read result files: the JSONL of any batch run (resumed, ``-dp``, scored), a ``--json``
document of a run named on the command line, or Parquet results. One function, ``load``,
returns the rows in one shape for the report, the scorer and the comparison.

Lines are taken as a resumed ledger holds them: an id's successful line wins over its error
lines, and a last line cut off by a killed run (no newline, not JSON) is left out. Scores
written with ``mmrun score --in-place`` (``FILE.scores.jsonl`` beside the file) are merged in.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrun.errors import MissingDependencyError, UsageError

# The fields every row has after loading (absent ones are None; media a list).
FIELDS = (
    "id",
    "index",
    "media",
    "question",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "meta",
    "parsed",
    "error",
    "replica",
    "reference",
    "score",
)
# Parquet (and CSV-like) writers store nested fields as JSON text.
_NESTED = ("meta", "parsed", "error", "score", "media")
SCORES_SUFFIX = ".scores.jsonl"


@dataclass(frozen=True)
class Results:
    """The rows of one result file, one per id, in input order; what produced them."""

    path: Path
    rows: list[dict[str, Any]]
    run: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    torn_last_line: bool = False
    # A batch's last run: when it opened the file (its FILE.mmrun.json) and wrote its last line.
    last_run_s: float | None = None

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["error"] is not None]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self.rows}


def is_blank(row: Mapping[str, Any]) -> bool:
    """An answer that came back empty or as whitespace alone (no error): no answer, to
    compare and score, and counted as such."""
    text = row.get("text")
    return row.get("error") is None and isinstance(text, str) and not text.strip()


def scores_path(path: Path) -> Path:
    """Where ``mmrun score --in-place`` keeps the scores of ``path`` (never in the file)."""
    return path.with_name(path.name + SCORES_SUFFIX)


def load(path: str | Path) -> Results:
    """The rows of a result file (``.jsonl``, ``.json``, ``.parquet``)."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise UsageError(f"no such result file: {path}", hint="give the -o file of an mmrun run")
    if source.suffix == ".parquet":
        raw, torn, document = _parquet(source), False, None
    else:
        raw, torn, document = _json_lines(source)
    if document is not None:
        raw = _document_rows(document)
    if not raw:
        raise UsageError(f"{path} holds no results", hint="give the -o file of an mmrun run")
    rows = _one_per_id(_normal(r, source, i) for i, r in enumerate(raw))
    _merge_scores(rows, scores_path(source))
    run, started = _run_record(source, document)
    timings = dict(document.get("timings") or {}) if document else {}
    last_run_s = None
    if started is not None and source.stat().st_mtime >= started:
        last_run_s = source.stat().st_mtime - started
    return Results(source, rows, run, timings, torn, last_run_s)


def _json_lines(path: Path) -> tuple[list[dict[str, Any]], bool, dict[str, Any] | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", hint="give a UTF-8 JSONL file") from None
    if text.lstrip().startswith("{"):  # a --json document (a JSONL file fails at its 2nd line)
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if isinstance(document, dict) and str(document.get("schema", "")).startswith(
            "mmrun.result/"
        ):
            return [], False, document
    lines = text.split("\n")
    torn = False
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines) and not text.endswith("\n"):
                torn = True  # a run killed while writing its last line
                continue
            raise UsageError(
                f"{path}:{number} is not a JSON line",
                hint="give the JSONL file an mmrun batch wrote (-o)",
            ) from None
        if not isinstance(row, dict) or "id" not in row:
            raise UsageError(
                f"{path}:{number} is not an mmrun result line (no id)",
                hint="give the JSONL file an mmrun batch wrote (-o)",
            )
        rows.append(row)
    return rows, torn, None


def _parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError(
            f"reading {path.name} needs pyarrow", hint="pip install 'mmrun[review]'"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid, OSError, ...
        raise UsageError(f"cannot read {path} as Parquet: {exc}", hint="check the file") from None
    if "id" not in table.column_names:
        raise UsageError(f"{path} has no id column", hint="give Parquet results mmrun wrote")
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _document_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The prompts of a ``mmrun.result/1`` document as rows (ids are their indexes)."""
    media = [m.get("source") for m in document.get("media", [])]
    groups = document.get("media_per_prompt") or []
    rows: list[dict[str, Any]] = []
    for output in document.get("outputs", []):
        index = output.get("index", len(rows))
        picked = groups[index] if index < len(groups) else list(range(len(media)))
        rows.append(
            {
                **output,
                "id": str(index),
                "index": index,
                "media": [media[i] for i in picked if i < len(media)],
                "question": document.get("question"),
                "error": None,
            }
        )
    return rows


def _normal(raw: Mapping[str, Any], path: Path, position: int) -> dict[str, Any]:
    row = {name: raw.get(name) for name in FIELDS}
    row.update({k: v for k, v in raw.items() if k not in row})
    for name in _NESTED:
        value = row[name]
        if isinstance(value, str) and value[:1] in "{[":
            with contextlib.suppress(ValueError):  # text that only looks like JSON
                row[name] = json.loads(value)
    row["id"] = str(row["id"])
    if row["index"] is None:
        row["index"] = position
    media = row["media"]
    row["media"] = [media] if isinstance(media, str) else list(media or [])
    if row["error"] is not None and not isinstance(row["error"], dict):
        row["error"] = {"stage": "unknown", "message": str(row["error"])}
    return row


def _one_per_id(rows: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """An id's successful line wins over its failed ones (a resumed or retried ledger)."""
    chosen: dict[str, dict[str, Any]] = {}
    for row in rows:
        before = chosen.get(row["id"])
        if before is None or before["error"] is not None:
            chosen[row["id"]] = row
    return sorted(chosen.values(), key=lambda r: (r["index"], r["id"]))


def _merge_scores(rows: list[dict[str, Any]], path: Path) -> None:
    if not path.is_file():
        return
    by_id = {row["id"]: row for row in rows}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
            row = by_id.get(str(record["id"]))
        except (ValueError, KeyError, TypeError):
            raise UsageError(
                f"{path}:{number} is not a score line",
                hint=f"remove {path.name}, then run mmrun score --in-place again",
            ) from None
        if row is not None:
            row["score"] = {**(row["score"] or {}), **(record.get("score") or {})}
            if record.get("reference") is not None:
                row["reference"] = record["reference"]


def _run_record(
    path: Path, document: Mapping[str, Any] | None
) -> tuple[dict[str, Any], float | None]:
    """What produced the file (the batch's ``FILE.mmrun.json``, or the document's own), and
    when the batch's last run started."""
    if document is not None:
        model = document.get("model") or {}
        return {
            "key": model.get("key"),
            "model": model.get("model"),
            "modality": document.get("modality"),
            "method": document.get("method"),
        }, None
    try:
        record = json.loads(path.with_name(path.name + ".mmrun.json").read_text())
        run = record["run"]
        started = calendar.timegm(time.strptime(record["updated"], "%Y-%m-%dT%H:%M:%SZ"))
    except (OSError, ValueError, KeyError, TypeError):
        return {}, None
    return (dict(run) if isinstance(run, dict) else {}), float(started)
