"""A batch's result lines (the JSONL ledger ``-o`` writes) as a Parquet or CSV table, for
datasets, pandas, DuckDB or polars users to load in one line and join back to their input on
``id`` (or ``index``, the row's place in the input).

Columns: id, index, media, question, text, prompt_tokens, completion_tokens, finish_reason,
error, error_stage, then each kept input column (``--keep-columns``: a line's ``meta``), named
as in the input (``meta.NAME`` where that would clash). The ledger is read a chunk of lines at
a time, twice (once for the schema, once to write), so memory does not grow with its length.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError

TABLE_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
CHUNK_LINES = 10_000
RESULT_COLUMNS = (
    "id",
    "index",
    "media",
    "question",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "error",
    "error_stage",
)


def table_format(path: str | Path) -> str | None:
    """ "parquet" or "csv" for a table's file name, None for anything else."""
    return TABLE_FORMATS.get(Path(path).suffix.lower())


def flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """One result line (``mmrun.batch/1`` or an OpenAI batch output line) as a table row."""
    if "custom_id" in row:
        return _flat_openai(row)
    error = row.get("error") or {}
    flat_row = {
        "id": row.get("id"),
        "index": row.get("index"),
        "media": row.get("media"),
        "question": row.get("question"),
        "text": row.get("text"),
        "prompt_tokens": row.get("prompt_tokens"),
        "completion_tokens": row.get("completion_tokens"),
        "finish_reason": row.get("finish_reason"),
        "error": error.get("message"),
        "error_stage": error.get("stage"),
    }
    for key, value in (row.get("meta") or {}).items():
        flat_row[f"meta.{key}" if key in flat_row else key] = value
    return flat_row


def _flat_openai(row: Mapping[str, Any]) -> dict[str, Any]:
    body = (row.get("response") or {}).get("body") or {}
    choice = (body.get("choices") or [{}])[0]
    usage = body.get("usage") or {}
    error = (row.get("error") or {}).get("error") or {}
    return {
        "id": row.get("custom_id"),
        "text": (choice.get("message") or {}).get("content"),
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "finish_reason": choice.get("finish_reason"),
        "error": error.get("message"),
    }


def _chunks(ledger: Path) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    try:
        with open(ledger, encoding="utf-8") as lines:
            for line_no, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                try:
                    chunk.append(flat(json.loads(raw)))
                except (ValueError, AttributeError, TypeError) as exc:
                    raise UsageError(
                        f"{ledger} line {line_no} is not a result line ({exc})",
                        hint="export the JSONL file an mmrun batch wrote (-o)",
                    ) from exc
                if len(chunk) == CHUNK_LINES:
                    yield chunk
                    chunk = []
    except OSError as exc:
        raise UsageError(f"cannot read {ledger}: {exc.strerror or exc}") from exc
    if chunk:
        yield chunk


def export(ledger: str | Path, out: str | Path, kind: str | None = None) -> int:
    """Write the table; the number of rows. ``kind``: "parquet" or "csv" (None: from the
    name). The file appears whole or not at all."""
    import pyarrow as pa

    ledger, out = Path(ledger).expanduser(), Path(out).expanduser()
    kind = kind or table_format(out)
    if kind not in ("parquet", "csv"):
        raise UsageError(f"cannot tell the table format of {out}", hint="name a .parquet or .csv")
    if not ledger.is_file():
        raise UsageError(f"no such results file: {ledger}", hint="name the -o file of a batch")
    schemas = [_table(chunk, None, kind).schema for chunk in _chunks(ledger)]
    schema = (
        pa.unify_schemas(schemas, promote_options="permissive")
        if schemas
        else pa.schema([(name, pa.null()) for name in RESULT_COLUMNS])
    )
    names = list(dict.fromkeys([*(n for n in RESULT_COLUMNS if n in schema.names), *schema.names]))
    schema = pa.schema([schema.field(n) for n in names])
    partial = out.with_name(f".{out.name}.{os.getpid()}.part")
    rows = 0
    try:
        with _writer(partial, schema, kind) as write:
            for chunk in _chunks(ledger):
                write(_table(chunk, schema, kind))
                rows += len(chunk)
            if not rows:
                write(schema.empty_table())
        os.replace(partial, out)
    except (OSError, pa.ArrowException) as exc:
        partial.unlink(missing_ok=True)
        raise UsageError(f"cannot write {out}: {exc}", hint="choose a writable path") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return rows


def _table(chunk: list[dict[str, Any]], schema: Any, kind: str) -> Any:
    import pyarrow as pa

    if kind == "csv":  # CSV holds no lists or structs: those cells as JSON text
        chunk = [
            {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in row.items()}
            for row in chunk
        ]
    if schema is None:
        return pa.Table.from_pylist(chunk)
    return pa.Table.from_pylist(chunk, schema=schema)


class _writer:
    """A Parquet or CSV writer as a context manager that takes tables."""

    def __init__(self, path: Path, schema: Any, kind: str) -> None:
        self.path, self.schema, self.kind = path, schema, kind

    def __enter__(self) -> Any:
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            self._writer: Any = pq.ParquetWriter(self.path, self.schema)
        else:
            import pyarrow.csv as pacsv

            self._writer = pacsv.CSVWriter(self.path, self.schema)
        return self._writer.write_table

    def __exit__(self, *exc: object) -> None:
        self._writer.close()
