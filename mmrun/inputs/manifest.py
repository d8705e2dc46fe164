"""mmrun's own JSONL manifest, as a stream of :class:`Item` (one prompt each).

A manifest line is ``{"id": "...", "<media field>": "src" | ["src", ...], "question": "...",
"meta": {...}, "sampling": {...}, "json_schema" | "choice" | "regex": ...}`` (only the media
field, the modality's ``field_name``, is required; the id defaults to the line number;
``sampling`` and the constraint replace the command line's for that prompt) or a bare path or
URL, a prompt of one item whose id is that source; a media field may also hold base64 text (an
image's bytes, told by their content). Relative paths are relative to the manifest's folder
(standard input's: the current folder), or to ``--media-root``. A manifest is read twice: once
when the run is planned (every line checked, ids unique, before any engine starts) and once,
streamed, while it runs, so memory does not grow with its length.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError
from mmrun.inputs.selection import Selection
from mmrun.inputs.template import EMPTY_QUESTION, QuestionTemplate
from mmrun.item import Item
from mmrun.media.inline import InlineError, field_sources
from mmrun.registry import Modality
from mmrun.sampling import check_sampling
from mmrun.structured import LINE_FIELDS, asks_for_json, from_line, from_sampling_arg


class Manifest:
    """A JSONL manifest (a file, or standard input spooled to a temporary file)."""

    def __init__(
        self,
        source: str,
        modality: Modality,
        selection: Selection | None = None,
        *,
        template: QuestionTemplate | None = None,
        base: Path | None = None,
    ) -> None:
        """``template``: each line's question from its meta fields, its question and id;
        ``base``: the folder relative paths are relative to (None: the manifest's own)."""
        self.modality = modality
        self.selection = selection or Selection()
        self.label = "standard input" if source == "-" else source
        self.template = template
        if source == "-":
            self.path = _spool_stdin()
            self.base = Path.cwd()
        else:
            self.path = Path(source).expanduser()
            if not self.path.is_file():
                raise UsageError(f"no such manifest: {source}", hint="check the --input path")
            self.base = self.path.parent
        self.base = base or self.base
        self.total = 0
        self.max_count = 0
        self.asks_for_json = False  # a line's own constraint is JSON

    def check(self) -> None:
        """Read every line once: each must parse, ids must be unique. Sets total, max_count."""
        seen: dict[str, int] = {}
        fields = {"id", "question"}
        total = max_count = 0
        for item, line_no in self._read():
            fields.update(item.meta or {})
            if item.id in seen:
                raise UsageError(
                    f"{self.label} line {line_no}: id {item.id!r} already used on line "
                    f"{seen[item.id]}",
                    hint="give each line a unique id",
                )
            seen[item.id] = line_no
            if item.sampling and not self.asks_for_json:
                self.asks_for_json = asks_for_json(item.sampling.get("structured_outputs"))
            total += 1
            max_count = max(max_count, len(item.sources))
        if not total:
            raise UsageError(f"{self.label} holds no prompts", hint="one JSON object per line")
        if self.template is not None:
            self.template.check(sorted(fields), self.label, "field")
        self.total, self.max_count = total, max_count

    def __iter__(self) -> Iterator[Item]:
        for item, _ in self._read():
            yield item

    def _read(self) -> Iterator[tuple[Item, int]]:
        selection, taken = self.selection, 0
        try:
            with open(self.path, encoding="utf-8") as lines:
                index = 0
                for line_no, raw in enumerate(lines, start=1):
                    text = raw.strip()
                    if not text:
                        continue
                    if selection.keeps(index):
                        if taken == selection.limit:
                            return
                        taken += 1
                        yield self._item(text, line_no, index), line_no
                    index += 1
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{self.label} is not UTF-8 text ({exc.reason})", hint="save it as UTF-8"
            ) from exc
        except OSError as exc:
            raise UsageError(f"cannot read {self.label}: {exc.strerror or exc}") from exc

    def _item(self, text: str, line_no: int, index: int) -> Item:
        where = f"{self.label} line {line_no}"
        name, field = self.modality.name, self.modality.field_name
        if not text.startswith(("{", "[", '"')):
            # A bare path or URL: a prompt of one item, known by its source. Not by its line:
            # `find` lists files in no fixed order, and a resumed run must skip the right ones.
            source = self._source(text)
            return Item(source, index, (source,))
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"{where} is not valid JSON ({exc.msg} at column {exc.colno})",
                hint='write one object per line, e.g. {"id": "a", "' + field + '": "a.jpg"}',
            ) from exc
        if not isinstance(row, dict):
            raise UsageError(f"{where} is not a JSON object", hint="one object per line")
        unknown = sorted(set(row) - {"id", field, "question", "meta", "sampling", *LINE_FIELDS})
        if unknown:
            raise UsageError(
                f"{where} has unknown field {unknown[0]!r}",
                hint=f"use id, {field}, question, meta, sampling, json_schema, choice or regex "
                f"(this is `mmrun {name}`)",
            )
        media = row.get(field, [])
        if isinstance(media, str):
            media = [media]
        if not isinstance(media, list) or not all(isinstance(s, str) and s for s in media):
            raise UsageError(
                f"{where}: {field!r} must be a source or a list of sources (non-empty strings)"
            )
        ident = row.get("id", line_no)
        if isinstance(ident, bool) or not isinstance(ident, str | int) or ident == "":
            raise UsageError(f"{where}: 'id' must be a non-empty string or an integer")
        question = row.get("question")
        if question is not None and not isinstance(question, str):
            raise UsageError(f"{where}: 'question' must be a string")
        meta = row.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise UsageError(f"{where}: 'meta' must be a JSON object")
        sampling = self._sampling(row, where)
        if self.template is not None:
            question = self.template.render({**(meta or {}), "question": question, "id": ident})
            if question is None:
                return Item(str(ident), index, (), None, meta, problem=EMPTY_QUESTION)
        try:
            sources, names = field_sources(media, f"line {line_no} {name}", self._source)
        except InlineError as exc:
            return Item(str(ident), index, (), question, meta, problem=str(exc))
        return Item(str(ident), index, sources, question, meta, names=names, sampling=sampling)

    def _sampling(self, row: Mapping[str, Any], where: str) -> dict[str, Any] | None:
        """The line's own sampling settings and constraint, checked; None where it has none."""
        own = row.get("sampling")
        if own is not None and not isinstance(own, dict):
            raise UsageError(
                f"{where}: 'sampling' must be a JSON object", hint='e.g. {"max_tokens": 20}'
            )
        settings = dict(own or {})
        check_sampling(settings, f"{where}: sampling")
        if "structured_outputs" in settings:
            settings["structured_outputs"] = from_sampling_arg(
                settings["structured_outputs"], f"{where}: sampling structured_outputs"
            )
        constraint = from_line(row, where, self.base)
        if constraint is not None:
            if "structured_outputs" in settings:
                raise UsageError(
                    f"{where}: sampling structured_outputs and the line's constraint both "
                    "constrain the answer",
                    hint="give one of them",
                )
            settings["structured_outputs"] = constraint
        return settings or None

    def _source(self, text: str) -> str:
        """A relative path is relative to the manifest's folder; URLs, data URIs and asset
        names stay as they are."""
        if "://" in text or text.startswith("data:") or os.path.isabs(text):
            return text
        if text in {asset.name for asset in self.modality.assets}:
            return text
        return os.path.normpath(self.base / os.path.expanduser(text))  # no "media/../photos"


def _spool_stdin() -> Path:
    """Standard input into a temporary file (removed at exit): a manifest is read twice."""
    import atexit

    handle, name = tempfile.mkstemp(prefix="mmrun-manifest-", suffix=".jsonl")
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    with os.fdopen(handle, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out)
    return Path(name)
