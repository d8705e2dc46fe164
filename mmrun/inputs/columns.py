"""Which column of a table is the prompt's media, id and question (``--columns``, else found
by the modality's ``datasets`` feature type or a common name), and what a cell holds: a path
(relative to the table, or to ``--media-root``), a URL, a data URI, base64 text, raw bytes, a
``{"bytes", "path"}`` struct (how ``datasets`` stores Image and Audio), an audio array with its
sampling rate, or a list of these for several items in one prompt."""

from __future__ import annotations

import ast
import base64
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError, shown
from mmrun.media.inline import InlineError, inline_uri, looks_like_base64
from mmrun.plugins import get_registry
from mmrun.registry import Modality

# Column names taken for a field when --columns does not name one (compared case-blind); the
# media's are the modality's (Modality.column_names), and "<media field>_id" is an id too.
ID_NAMES = ("id", "uid", "key", "__key__", "sample_id")
QUESTION_NAMES = ("question", "prompt", "query", "instruction")


@dataclass(frozen=True)
class Columns:
    """The columns a run reads: media (always), id and question (None: the row's index; the
    run's question) and those copied to each result line's meta."""

    media: str
    id: str | None = None
    question: str | None = None
    keep: tuple[str, ...] = ()

    def needed(self) -> list[str]:
        wanted = [self.media, self.id, self.question, *self.keep]
        return list(dict.fromkeys(c for c in wanted if c is not None))


def parse_mapping(text: str | None, modality: Modality) -> dict[str, str]:
    """``--columns id=uid,image=img,question=prompt`` as {field: column}."""
    fields = ("id", modality.field_name, "question")
    mapping: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        field, sep, column = (part.strip() for part in pair.partition("="))
        if not sep or not column or field not in fields:
            raise UsageError(
                f"invalid --columns entry {pair.strip()!r}",
                hint=f"write FIELD=COLUMN with FIELD one of {', '.join(fields)}, "
                f"e.g. --columns {modality.field_name}=img,question=prompt",
            )
        mapping[field] = column
    return mapping


def parse_keep(text: str | None) -> tuple[str, ...]:
    return tuple(c.strip() for c in (text or "").split(",") if c.strip())


def choose(
    found: Sequence[str],
    mapping: Mapping[str, str],
    keep: Sequence[str],
    modality: Modality,
    label: str,
    features: Mapping[str, str] | None = None,
) -> Columns:
    """The columns of a table with the columns ``found``; ``features``: column -> its
    ``datasets`` feature type, where the table records one. One line (exit 2) listing the
    columns found when a named column is missing or a field's column is ambiguous."""
    listed = ", ".join(found) if found else "none"

    def named(field: str) -> str | None:
        column = mapping.get(field)
        if column is not None and column not in found:
            raise UsageError(
                f"{label} has no column {column!r} (--columns {field}={column})",
                hint=f"its columns: {listed}",
            )
        return column

    def guess(field: str, names: Iterable[str], required: bool) -> str | None:
        wanted = {n.lower() for n in names}
        hits = [c for c in found if c.lower() in wanted]
        if len(hits) > 1:
            raise UsageError(
                f"{label}: more than one column could be the {field} ({', '.join(hits)})",
                hint=f"name it with --columns {field}=COLUMN; its columns: {listed}",
            )
        if not hits and required:
            raise UsageError(
                f"{label} has no {field} column",
                hint=f"name it with --columns {field}=COLUMN; its columns: {listed}",
            )
        return hits[0] if hits else None

    name, feature = modality.field_name, modality.feature_type
    media = named(name)
    if media is None:
        typed = [c for c, kind in (features or {}).items() if feature and kind == feature]
        if len(typed) == 1:
            media = typed[0]
        elif len(typed) > 1:
            raise UsageError(
                f"{label} has several {feature} columns ({', '.join(typed)})",
                hint=f"name one with --columns {name}=COLUMN",
            )
        else:
            media = guess(name, modality.column_names or (name,), required=True)
    assert media is not None
    ident = named("id") if "id" in mapping else guess("id", id_names(), required=False)
    question = (
        named("question")
        if "question" in mapping
        else guess("question", QUESTION_NAMES, required=False)
    )
    missing = [c for c in keep if c not in found]
    if missing:
        raise UsageError(
            f"{label} has no column {missing[0]!r} (--keep-columns)", hint=f"its columns: {listed}"
        )
    return Columns(media=media, id=ident, question=question, keep=tuple(keep))


def id_names() -> tuple[str, ...]:
    """The column names taken as the id: ID_NAMES and every registered modality's
    ``<media field>_id``."""
    own = (f"{m.field_name}_id" for m in get_registry().modalities.values())
    return (*ID_NAMES, *own)


class CellError(ValueError):
    """A cell that holds no media source: the row's error line says why."""


def media_of(cell: Any, base: Path | None, where: str) -> tuple[list[str], list[str]]:
    """A media cell as (sources, names): what the media pipeline fetches and what result lines
    list. Inline data becomes a data: URI named ``where`` (or the struct's own path)."""
    if cell is None:
        return [], []
    if isinstance(cell, list | tuple):
        sources: list[str] = []
        names: list[str] = []
        for i, part in enumerate(cell):
            if isinstance(part, list | tuple):
                raise CellError(f"{where}[{i}] is a list inside a list, not a media source")
            got, got_names = media_of(part, base, f"{where}[{i}]")
            sources += got
            names += got_names
        return sources, names
    if isinstance(cell, str):
        text = cell.strip()
        parts = listed(text)
        if parts is not None:
            return media_of(parts, base, where)
        if not text:
            return [], []
        if looks_like_base64(text):
            try:
                return [inline_uri(text)], [where]
            except InlineError as exc:
                raise CellError(f"{where} holds {exc}") from None
        source = resolve_path(text, base)
        return [source], [source]
    if isinstance(cell, bytes | bytearray | memoryview):
        return [data_uri(bytes(cell))], [where]
    if isinstance(cell, Mapping):
        data = cell.get("bytes")
        if isinstance(data, bytes | bytearray | memoryview):
            name = cell.get("path")
            return [data_uri(bytes(data))], [str(name) if name else where]
        if cell.get("array") is not None and cell.get("sampling_rate") is not None:
            return [data_uri(wav_bytes(cell["array"], cell["sampling_rate"], where))], [where]
        if isinstance(cell.get("path"), str) and cell["path"]:
            return media_of(cell["path"], base, where)
        keys = ", ".join(sorted(map(str, cell))) or "no keys"
        raise CellError(
            f"{where} is a struct of {keys}: not a media source "
            "(expected bytes/path, or array/sampling_rate)"
        )
    raise CellError(
        f"{where} holds a {type(cell).__name__} ({shown(str(cell))!r}), not a media source "
        "(a path, URL, data: URI, bytes, or a {bytes, path} struct)"
    )


def listed(text: str) -> list[Any] | None:
    """A list written in a text cell: as JSON (a CSV's list), or as Python writes one (the
    ``['...', '...']`` of a benchmark TSV's several images); None for any other text."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        parts = json.loads(text)
    except ValueError:
        try:
            parts = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return parts if isinstance(parts, list) else None


def resolve_path(text: str, base: Path | None) -> str:
    """A relative path is relative to the table's folder (``media/../photos/a.png`` shown as
    ``photos/a.png``); URLs and data URIs stay as they are."""
    if base is None or "://" in text or text.startswith("data:") or os.path.isabs(text):
        return text
    return os.path.normpath(base / os.path.expanduser(text))


def data_uri(data: bytes) -> str:
    """Bytes as a data: URI; the media's own header tells the decoder what it is."""
    return "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")


def wav_bytes(array: Any, sampling_rate: Any, where: str) -> bytes:
    """An audio array (samples, or samples x channels) and its rate as a float WAV file."""
    import numpy as np
    import soundfile

    try:
        samples = np.asarray(array, dtype=np.float32)
        rate = int(sampling_rate)
        if samples.ndim not in (1, 2) or not samples.size or rate <= 0:
            raise ValueError("an empty array, or one of more than two dimensions")
        out = io.BytesIO()
        soundfile.write(out, samples, rate, format="WAV", subtype="FLOAT")
    except (TypeError, ValueError, RuntimeError) as exc:
        raise CellError(f"{where} is not an audio array with its sampling rate ({exc})") from exc
    return out.getvalue()


def plain(value: Any) -> Any:
    """A kept cell as JSON can hold it (bytes as a short note, not their content)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
