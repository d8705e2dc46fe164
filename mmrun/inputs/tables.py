"""Tables as prompts, one row each, read with pyarrow a batch of rows at a time: Parquet (a
file, a folder or a glob of shards, by row group), CSV and TSV (by block), Arrow IPC files and
the folders ``datasets``' ``save_to_disk`` writes (memory-mapped). Memory stays flat however
many rows there are: only the row batch in hand is decoded into Python objects.

A table is read twice, as a manifest is: when the run is planned (its schema and columns
checked, its rows counted from the file metadata, ids checked unique from the id column
alone) and, streamed, while it runs.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError
from mmrun.inputs.columns import CellError, Columns, choose, listed, media_of, plain
from mmrun.inputs.selection import Selection
from mmrun.inputs.template import EMPTY_QUESTION, QuestionTemplate
from mmrun.item import Item
from mmrun.registry import Modality

# Rows turned into Python objects at a time: a batch of large images stays a few MB.
BATCH_ROWS = 64
FORMATS = ("parquet", "csv", "tsv", "arrow")


class Table:
    """The rows of one or more files of one format (``parquet``, ``csv``, ``tsv``, ``arrow``).

    base: the folder relative paths in cells are relative to (the table's own, or
        ``--media-root``).
    features: column -> its ``datasets`` feature type, where a data set card declares them
        (a file's own schema metadata adds to them).
    template: each row's question built from its columns (``--question-template``).
    """

    def __init__(
        self,
        files: Sequence[Path],
        kind: str,
        modality: Modality,
        *,
        label: str,
        base: Path | None,
        mapping: Mapping[str, str],
        keep: Sequence[str],
        selection: Selection | None = None,
        features: Mapping[str, str] | None = None,
        template: QuestionTemplate | None = None,
    ) -> None:
        if not files:
            raise UsageError(f"{label} holds no {kind} files", hint="check the --input path")
        self.files = list(files)
        self.kind = kind
        self.modality = modality
        self.label = label
        self.base = base
        self.mapping = dict(mapping)
        self.keep = tuple(keep)
        self.selection = selection or Selection()
        self.features = dict(features or {})
        self.template = template
        self.columns: Columns | None = None
        # A row's id -> its media cell, for the rows whose media cell names another row by its
        # id (a benchmark TSV stores an image once; the rows that ask about it again hold the
        # first row's index).
        self.shared: dict[str, str] = {}
        self._index: str | None = None
        self.total = 0
        self.max_count = 0

    def check(self) -> None:
        """Schema and columns, row count, ids unique, the most media items one row holds."""
        import pyarrow as pa

        schema = self._schema(self.files[0])
        self.columns = columns = choose(
            schema.names,
            self.mapping,
            self.keep,
            self.modality,
            self.label,
            {**self.features, **_features(schema)},
        )
        if self.template is not None:
            self.template.check(schema.names, self.label)
        # What a media cell that names another row names it by: the id, else the index column.
        self._index = columns.id or ("index" if "index" in schema.names else None)
        field = schema.field(columns.media)
        _check_media_type(field.type, columns.media, self.label)
        rows = self._count()
        self.total = self.selection.count(rows)
        if not self.total:
            raise UsageError(f"{self.label} holds no rows", hint="check the --input path")
        is_list = pa.types.is_list(field.type) or pa.types.is_large_list(field.type)
        self.max_count = 1
        references: set[str] = set()
        if is_list or self.kind in ("csv", "tsv"):
            most, references = self._most_items()
            self.max_count = max(1, most)
        if columns.id is not None:
            self._check_ids(columns.id, rows)
        if references:
            self._share(references)

    def __iter__(self) -> Iterator[Item]:
        if self.columns is None:
            self.check()
        columns = self.columns
        assert columns is not None
        selection, taken, index = self.selection, 0, 0
        wanted = [*columns.needed(), *(self.template.fields if self.template else ())]
        for batch in self._batches(list(dict.fromkeys(wanted))):
            picked = [i for i in range(batch.num_rows) if selection.keeps(index + i)]
            if picked:
                rows = batch.take(picked).to_pylist() if len(picked) < batch.num_rows else None
                for offset, row in zip(picked, rows or batch.to_pylist(), strict=True):
                    if taken == selection.limit:
                        return
                    taken += 1
                    yield self._item(row, index + offset, columns)
            index += batch.num_rows

    def _item(self, row: Mapping[str, Any], index: int, columns: Columns) -> Item:
        ident = row.get(columns.id) if columns.id is not None else index
        question = row.get(columns.question) if columns.question is not None else None
        if isinstance(question, str) and not question.strip():  # an empty cell (CSV)
            question = None
        meta = {c: plain(row.get(c)) for c in columns.keep} or None
        if self.template is not None:
            question = self.template.render(row)
            if question is None:
                return Item(str(ident), index, (), None, meta, problem=EMPTY_QUESTION)
        where = f"row {index} {columns.media}"
        cell = row.get(columns.media)
        if isinstance(cell, str) and cell.strip() in self.shared:
            cell = self.shared[cell.strip()]
        try:
            sources, names = media_of(cell, self.base, where)
        except CellError as exc:
            return Item(str(ident), index, (), question, meta, problem=str(exc))
        return Item(
            str(ident),
            index,
            tuple(sources),
            None if question is None else str(question),
            meta,
            names=tuple(names) if names != sources else None,
        )

    # Reading, by format.

    def _schema(self, path: Path) -> Any:
        try:
            if self.kind == "parquet":
                import pyarrow.parquet as pq

                return pq.read_schema(path)
            if self.kind == "arrow":
                return _open_ipc(path).schema
            return next(self._csv_batches(path, None)).schema
        except StopIteration:
            raise UsageError(f"{self.label} is empty", hint="check the --input path") from None
        except (OSError, ValueError) as exc:
            raise _unreadable(self.label, self.kind, exc) from exc

    def _count(self) -> int:
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            total = 0
            for path in self.files:
                try:
                    total += pq.ParquetFile(path).metadata.num_rows
                except (OSError, ValueError) as exc:
                    raise _unreadable(str(path), self.kind, exc) from exc
            return total
        return sum(batch.num_rows for batch in self._batches([]))

    def _most_items(self) -> tuple[int, set[str]]:
        """The most media items a row holds (list cells, or lists written in a CSV's text),
        and the cells that name another row by its id rather than holding media."""
        import pyarrow as pa
        import pyarrow.compute as pc

        assert self.columns is not None
        most = 0
        references: set[str] = set()
        for batch in self._batches([self.columns.media]):
            column = batch.column(0)
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                lengths = pc.max(pc.list_value_length(column)).as_py()
                most = max(most, lengths or 0)
            elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                for cell in column.to_pylist():
                    text = (cell or "").strip()
                    parts = listed(text)
                    if parts is not None:
                        most = max(most, len(parts))
                    elif text:
                        most = max(most, 1)
                        if text.isdigit() and self._index is not None:
                            references.add(text)
            else:
                most = max(most, 1)
        return most, references

    def _share(self, references: set[str]) -> None:
        """The media cells of the rows that other rows name by id (the cells of bare digits
        that are no file beside the table), kept for those rows."""
        assert self.columns is not None and self._index is not None
        if self.base is not None:
            references = {r for r in references if not (self.base / r).exists()}
        found: dict[str, Any] = {}
        for batch in self._batches([self._index, self.columns.media]):
            for ident, cell in zip(
                batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
            ):
                key = str(ident)
                if key in references and isinstance(cell, str) and not cell.strip().isdigit():
                    found[key] = cell
        self.shared = found

    def _check_ids(self, name: str, rows: int) -> None:
        """Every row has an id, and no two the same: read from the id column alone, keeping
        8 bytes per row (each id's hash), and the ids themselves only where hashes repeat."""
        import numpy as np

        hashes = np.empty(rows, dtype=np.int64)
        index = 0
        for batch in self._batches([name]):
            values = batch.column(0).to_pylist()
            if None in values:
                raise UsageError(
                    f"{self.label} row {index + values.index(None)}: the id column {name!r} "
                    "is empty",
                    hint="give every row an id, or choose another with --columns id=COLUMN",
                )
            hashes[index : index + len(values)] = np.fromiter(
                map(hash, values), dtype=np.int64, count=len(values)
            )
            index += len(values)
        hashes.sort()
        repeated = set(hashes[1:][hashes[1:] == hashes[:-1]].tolist())
        if not repeated:
            return
        seen: set[Any] = set()
        for batch in self._batches([name]):
            for value in batch.column(0).to_pylist():
                if hash(value) in repeated:
                    if value in seen:
                        raise UsageError(
                            f"{self.label}: id {value!r} (column {name!r}) is on more than one row",
                            hint="give each row a unique id, or choose another with "
                            "--columns id=COLUMN",
                        )
                    seen.add(value)

    def _batches(self, names: list[str]) -> Iterator[Any]:
        for path in self.files:
            try:
                if self.kind == "parquet":
                    yield from _parquet_batches(path, names)
                elif self.kind == "arrow":
                    yield from _ipc_batches(path, names)
                else:
                    yield from self._csv_batches(path, names)
            except (OSError, ValueError) as exc:
                raise _unreadable(str(path), self.kind, exc) from exc

    def _csv_batches(self, path: Path, names: list[str] | None) -> Iterator[Any]:
        """CSV or TSV by blocks, every column read as text (an id "007" stays "007")."""
        import pyarrow as pa
        import pyarrow.csv as pacsv

        delimiter = "\t" if self.kind == "tsv" else ","
        with open(path, encoding="utf-8", newline="") as file:
            header = next(csv.reader(file, delimiter=delimiter), [])
        convert = pacsv.ConvertOptions(
            column_types={name: pa.string() for name in header},
            include_columns=names,
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 20),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=convert,
        )
        for batch in reader:
            yield from _slices(batch)


def _parquet_batches(path: Path, names: list[str]) -> Iterator[Any]:
    import pyarrow.parquet as pq

    source = pq.ParquetFile(path)
    yield from source.iter_batches(batch_size=BATCH_ROWS, columns=names)


def _open_ipc(path: Path) -> Any:
    """An Arrow IPC file or stream (``datasets`` writes streams), memory-mapped."""
    import pyarrow as pa

    try:
        return pa.ipc.open_file(pa.memory_map(str(path)))
    except pa.ArrowInvalid:
        return pa.ipc.open_stream(pa.memory_map(str(path)))


def _ipc_batches(path: Path, names: list[str]) -> Iterator[Any]:
    import pyarrow as pa

    reader = _open_ipc(path)
    if isinstance(reader, pa.ipc.RecordBatchFileReader):
        batches: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
    else:
        batches = iter(reader)
    for batch in batches:
        yield from _slices(batch.select(names))


def _slices(batch: Any) -> Iterator[Any]:
    for start in range(0, batch.num_rows, BATCH_ROWS):
        yield batch.slice(start, BATCH_ROWS)


def _features(schema: Any) -> dict[str, str]:
    """Column -> its ``datasets`` feature type ("Image", "Audio", ...), from the schema's
    metadata where ``datasets`` wrote it (Parquet and Arrow files it saved)."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        features = json.loads(raw)["info"]["features"]
    except (ValueError, KeyError, TypeError):
        return {}
    found: dict[str, str] = {}
    for name, feature in features.items() if isinstance(features, dict) else ():
        if isinstance(feature, dict):
            kind = feature.get("_type")
            if kind == "List" or kind == "Sequence":  # a list of images: the inner type
                inner = feature.get("feature")
                kind = inner.get("_type") if isinstance(inner, dict) else kind
            if isinstance(kind, str):
                found[name] = kind
        elif isinstance(feature, list) and feature and isinstance(feature[0], dict):
            kind = feature[0].get("_type")
            if isinstance(kind, str):
                found[name] = kind
    return found


def _check_media_type(kind: Any, name: str, label: str) -> None:
    """A media column holds text, bytes, structs or lists of these: refuse any other type at
    once (one line), rather than every row failing the same way."""
    import pyarrow as pa

    inner = kind
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = kind.value_type
    if (
        pa.types.is_string(inner)
        or pa.types.is_large_string(inner)
        or pa.types.is_binary(inner)
        or pa.types.is_large_binary(inner)
        or pa.types.is_struct(inner)
        or pa.types.is_null(inner)
    ):
        return
    raise UsageError(
        f"{label}: column {name!r} holds {kind} values, not media sources",
        hint="name the column of paths, URLs or bytes with --columns",
    )


def _unreadable(label: str, kind: str, exc: BaseException) -> UsageError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    noun = {"parquet": "Parquet", "arrow": "Arrow", "csv": "CSV", "tsv": "TSV"}[kind]
    return UsageError(f"{label} is not a readable {noun} file ({text})", hint="check the file")
