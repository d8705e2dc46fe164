"""Where a batch's prompts come from, as a stream of :class:`Item` (one prompt each): media
named on the command line (files, folders, glob patterns), mmrun's JSONL manifest, tables
(Parquet, CSV/TSV, Arrow, ``datasets`` folders, Hugging Face Hub data sets), WebDataset tar
shards and OpenAI batch files (``--input``, by extension or ``--input-format``).

Each reader has ``check()`` (read once when the run is planned: the input is valid, ids are
unique; sets ``total`` and ``max_count``) and iterates its items as a stream.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mmrun.errors import UsageError
from mmrun.inputs.columns import parse_keep, parse_mapping
from mmrun.inputs.folders import expand_sources, is_pattern
from mmrun.inputs.manifest import Manifest
from mmrun.inputs.selection import Selection, selection_of
from mmrun.inputs.template import QuestionTemplate
from mmrun.item import Item
from mmrun.registry import Modality

__all__ = [
    "FORMATS",
    "Input",
    "InputOptions",
    "Item",
    "Manifest",
    "expand_sources",
    "is_pattern",
    "open_input",
    "selection_of",
]

FORMATS = ("jsonl", "openai", "conversations", "csv", "tsv", "parquet", "arrow", "webdataset", "hf")
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".tar": "webdataset",
    ".tgz": "webdataset",
}


class Input(Protocol):
    """A reader: ``check()`` once, then iterated (more than once) for its items."""

    label: str
    total: int
    max_count: int

    def check(self) -> None: ...

    def __iter__(self) -> Iterator[Item]: ...


@dataclass(frozen=True)
class InputOptions:
    """How to read ``--input``: its format (None: from the name), the column mapping and
    kept columns, the split, config and revision of a Hub data set, and the rows taken.

    question_template: each prompt's question built from its row's fields (template.py).
    media_root: the folder relative media paths are relative to (None: the input's own).
    """

    format: str | None = None
    columns: str | None = None
    keep_columns: str | None = None
    split: str | None = None
    dataset_config: str | None = None
    revision: str | None = None
    limit: int | None = None
    shard: str | None = None
    question_template: str | None = None
    media_root: str | None = None

    @property
    def table_options(self) -> bool:
        return any(
            (self.columns, self.keep_columns, self.split, self.dataset_config, self.revision)
        )


@dataclass(frozen=True)
class _Reading:
    """What every reader takes from the options, checked once."""

    selection: Selection
    mapping: Mapping[str, str]
    keep: tuple[str, ...]
    template: QuestionTemplate | None
    root: Path | None


def open_input(source: str, modality: Modality, options: InputOptions) -> Input:
    """The reader for ``--input source``; one line (exit 2) when it cannot be read."""
    template = options.question_template
    reading = _Reading(
        selection_of(options.limit, options.shard),
        parse_mapping(options.columns, modality),
        parse_keep(options.keep_columns),
        QuestionTemplate.parse(template) if template is not None else None,
        _media_root(options.media_root),
    )
    kind = options.format
    if kind is not None and kind not in FORMATS:
        raise UsageError(
            f"unknown --input-format {kind!r}", hint=f"use one of {', '.join(FORMATS)}"
        )
    from mmrun.inputs import hub

    if hub.is_hub(source) or kind == "hf":
        return _hub_table(source, modality, options, reading)
    if source == "-":
        _no_table_options(options, "a manifest on standard input")
        return Manifest(
            source, modality, reading.selection, template=reading.template, base=reading.root
        )
    path = Path(source).expanduser()
    files = _files(source, path)
    kind = kind or _kind(source, path, files)
    if kind in ("jsonl", "openai", "conversations"):
        if len(files) != 1:
            raise UsageError(f"--input {source} names {len(files)} files", hint="name one file")
        return _json_lines(source, files[0], kind, modality, options, reading)
    if kind == "webdataset":
        return _webdataset(source, files, modality, reading)
    from mmrun.inputs.tables import Table

    if kind == "arrow" and path.is_dir():
        files = _saved_dataset(path, options.split)
    base = path if path.is_dir() else (files[0].parent if files else Path.cwd())
    return Table(
        files,
        kind,
        modality,
        label=source,
        base=reading.root or base,
        mapping=reading.mapping,
        keep=reading.keep,
        selection=reading.selection,
        template=reading.template,
    )


def _hub_table(source: str, modality: Modality, options: InputOptions, reading: _Reading) -> Input:
    from mmrun.inputs import hub
    from mmrun.inputs.tables import Table

    files, file_kind, folder, features = hub.resolve(
        source, options.split, options.dataset_config, options.revision
    )
    return Table(
        files,
        file_kind,
        modality,
        label=source,
        base=reading.root or folder,
        mapping=reading.mapping,
        keep=reading.keep,
        selection=reading.selection,
        features=features,
        template=reading.template,
    )


def _json_lines(
    source: str,
    file: Path,
    kind: str,
    modality: Modality,
    options: InputOptions,
    reading: _Reading,
) -> Input:
    """A file of JSON lines (or a JSON array of conversation records): an OpenAI batch file,
    conversation records or a manifest, by ``kind`` or, for plain JSONL, by its first line."""
    from mmrun.inputs.conversations import Conversations, looks_like_conversations
    from mmrun.inputs.openai_batch import OpenAIBatch, looks_like_batch

    if kind == "openai" or (kind == "jsonl" and looks_like_batch(file)):
        _no_table_options(options, "an OpenAI batch file")
        if reading.template is not None:
            raise UsageError(
                "--question-template builds mmrun's own question; an OpenAI batch file "
                "brings its messages",
                hint="drop --question-template",
            )
        return OpenAIBatch(
            file, modality, label=source, selection=reading.selection, base=reading.root
        )
    if kind == "conversations" or looks_like_conversations(file):
        if options.columns or options.split or options.dataset_config or options.revision:
            raise UsageError(
                "--columns, --split, --dataset-config and --revision are for tables; "
                "--input is a file of conversation records",
                hint="drop them (--keep-columns names record fields)",
            )
        return Conversations(
            file,
            modality,
            label=source,
            selection=reading.selection,
            keep=reading.keep,
            template=reading.template,
            base=reading.root,
        )
    _no_table_options(options, "a JSONL manifest")
    return Manifest(
        str(file), modality, reading.selection, template=reading.template, base=reading.root
    )


def _webdataset(source: str, files: list[Path], modality: Modality, reading: _Reading) -> Input:
    from mmrun.inputs.webdataset import WebDataset

    if reading.template is not None:
        raise UsageError(
            "--question-template reads the fields of a table, a manifest's meta or a "
            "conversation record, not a tar shard's members",
            hint="name the question's member with --columns question=EXT",
        )
    return WebDataset(
        files,
        modality,
        label=source,
        mapping=reading.mapping,
        keep=reading.keep,
        selection=reading.selection,
    )


def _media_root(text: str | None) -> Path | None:
    if text is None:
        return None
    root = Path(text).expanduser()
    if not root.is_dir():
        raise UsageError(
            f"--media-root {text} is not a folder",
            hint="name the folder that the input's relative media paths are in",
        )
    return root


def _files(source: str, path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return []  # the folder's files depend on its format
    if is_pattern(source):
        found = sorted(Path(p) for p in glob.glob(os.path.expanduser(source), recursive=True))
        files = [p for p in found if p.is_file()]
        if not files:
            raise UsageError(f"no file matches {source!r}", hint="check the pattern, and quote it")
        return files
    raise UsageError(f"no such input: {source}", hint="check the --input path")


def _kind(source: str, path: Path, files: list[Path]) -> str:
    """The format from the name: a file's (or pattern's files') extension, or for a folder
    a ``save_to_disk`` data set, else the one format its files share."""
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return "arrow"
        files = sorted(p for p in path.rglob("*") if p.is_file())
    kinds = {_suffix_kind(p) for p in files} - {None}
    if len(kinds) == 1:
        kind = kinds.pop()
        assert kind is not None
        if path.is_dir():
            files[:] = [p for p in files if _suffix_kind(p) == kind]
        return kind
    raise UsageError(
        f"cannot tell the format of --input {source}",
        hint="pass --input-format (" + ", ".join(FORMATS) + ")",
    )


def _suffix_kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".tar.gz"):
        return "webdataset"
    return _SUFFIXES.get(path.suffix.lower())


def _saved_dataset(folder: Path, split: str | None) -> list[Path]:
    """The Arrow files of a folder ``datasets``' ``save_to_disk`` wrote (a Dataset, or one
    split of a DatasetDict)."""
    listing = folder / "dataset_dict.json"
    if listing.is_file():
        splits = json.loads(listing.read_text()).get("splits", [])
        chosen = split or (
            "train" if "train" in splits else (splits[0] if len(splits) == 1 else None)
        )
        if chosen not in splits:
            raise UsageError(
                f"{folder} has no split {chosen!r}" if chosen else f"{folder} holds several splits",
                hint=f"pass --split (its splits: {', '.join(splits)})",
            )
        folder = folder / str(chosen)
    state = folder / "state.json"
    if state.is_file():
        names = [f["filename"] for f in json.loads(state.read_text()).get("_data_files", [])]
        return [folder / n for n in names]
    return sorted(folder.glob("*.arrow"))


def _no_table_options(options: InputOptions, what: str) -> None:
    if options.table_options:
        raise UsageError(
            f"--columns, --keep-columns, --split, --dataset-config and --revision are for tables; "
            f"--input is {what}",
            hint="drop them",
        )
