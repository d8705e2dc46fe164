"""WebDataset shards (``.tar``, ``.tgz``, ``.tar.gz``) as prompts, one sample each, read with
tarfile one member at a time. A sample is the run of consecutive members that share a key
(the member's name up to the first dot of its file name); each member's extension names a
field (``jpg``, ``cls``, ``json``, ...). The key is the prompt's id; the media field is the
one among the modality's extensions (``--columns image=png`` chooses); text fields can be
the question or kept as meta."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError
from mmrun.inputs.columns import Columns, choose, data_uri
from mmrun.inputs.selection import Selection
from mmrun.item import Item
from mmrun.registry import Modality

KEY = "__key__"


def split_name(name: str) -> tuple[str, str]:
    """A member's (key, field): ``shard/000012.seg.png`` -> (``shard/000012``, ``seg.png``)."""
    folder, _, base = name.rpartition("/")
    stem, _, field = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), field.lower()


class WebDataset:
    """The samples of one or more tar shards, in order."""

    def __init__(
        self,
        files: Sequence[Path],
        modality: Modality,
        *,
        label: str,
        mapping: Mapping[str, str],
        keep: Sequence[str],
        selection: Selection | None = None,
    ) -> None:
        self.files = list(files)
        self.modality = modality
        self.label = label
        self.mapping = dict(mapping)
        self.keep = tuple(keep)
        self.selection = selection or Selection()
        self.columns: Columns | None = None
        self.total = 0
        self.max_count = 1

    def check(self) -> None:
        """Read the members' headers once: the fields found, the samples, unique keys."""
        fields: set[str] = set()
        keys: set[str] = set()
        rows = 0
        for key, sample in self._samples(headers_only=True):
            if key in keys:
                raise UsageError(
                    f"{self.label}: sample {key!r} appears twice (its members are not together)",
                    hint="write each sample's members next to each other in the tar",
                )
            keys.add(key)
            fields.update(sample)
            rows += 1
        extensions = {e.lower().lstrip(".") for e in self.modality.extensions}
        mapping = dict(self.mapping)
        name = self.modality.field_name
        if name not in mapping:
            media = sorted(fields & extensions)
            if len(media) == 1:
                mapping[name] = media[0]
            elif len(media) > 1:
                raise UsageError(
                    f"{self.label}: more than one field could be the {name} ({', '.join(media)})",
                    hint=f"name it with --columns {name}=FIELD",
                )
        mapping.setdefault("id", KEY)
        found = [KEY, *sorted(fields)]
        self.columns = choose(found, mapping, self.keep, self.modality, self.label)
        self.total = self.selection.count(rows)
        if not self.total:
            raise UsageError(f"{self.label} holds no samples", hint="check the --input path")

    def __iter__(self) -> Iterator[Item]:
        if self.columns is None:
            self.check()
        columns = self.columns
        assert columns is not None
        selection, taken = self.selection, 0
        for index, (key, sample) in enumerate(self._samples(headers_only=False)):
            if not selection.keeps(index):
                continue
            if taken == selection.limit:
                return
            taken += 1
            yield self._item(index, key, sample, columns)

    def _item(self, index: int, key: str, sample: Mapping[str, Any], columns: Columns) -> Item:
        question = sample.get(columns.question) if columns.question else None
        meta = {c: _text(sample.get(c), c) for c in columns.keep} or None
        ident = key if columns.id == KEY else _text(sample.get(columns.id or ""), "")
        data = sample.get(columns.media)
        if data is None:
            present = ", ".join(sorted(sample)) or "none"
            return Item(
                str(ident),
                index,
                (),
                meta=meta,
                problem=f"sample {key} has no .{columns.media} member (its members: {present})",
            )
        question_text = None if question is None else str(_text(question, "txt"))
        return Item(
            str(ident),
            index,
            (data_uri(data),),
            question_text,
            meta,
            names=(f"{key}.{columns.media}",),
        )

    def _samples(self, headers_only: bool) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, {field: bytes}) for each sample; only the fields' names with headers_only."""
        for path in self.files:
            try:
                # "r|*": a stream, one member at a time, compressed or not.
                with tarfile.open(path, "r|*") as tar:
                    key: str | None = None
                    sample: dict[str, Any] = {}
                    for member in tar:
                        if not member.isfile():
                            continue
                        member_key, field = split_name(member.name)
                        if not field:
                            continue
                        if member_key != key:
                            if key is not None:
                                yield key, sample
                            key, sample = member_key, {}
                        if headers_only:
                            sample[field] = None
                            continue
                        handle = tar.extractfile(member)
                        sample[field] = handle.read() if handle is not None else b""
                    if key is not None:
                        yield key, sample
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise UsageError(
                    f"{path} is not a readable tar shard ({exc})", hint="check the file"
                ) from exc


def _text(value: Any, field: str) -> Any:
    """A text member as a string (a .json member parsed), other bytes as a short note."""
    if not isinstance(value, bytes):
        return value
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(value)} bytes>"
    if field.endswith("json"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text.strip()
