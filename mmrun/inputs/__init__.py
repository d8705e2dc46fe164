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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mmrun.errors import UsageError
from mmrun.inputs.columns import parse_keep, parse_mapping
from mmrun.inputs.folders import expand_sources, is_pattern
from mmrun.inputs.items import Item
from mmrun.inputs.manifest import Manifest
from mmrun.inputs.selection import Selection, parse_shard
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
]

FORMATS = ("jsonl", "openai", "csv", "tsv", "parquet", "arrow", "webdataset", "hf")
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
    kept columns, the split, config and revision of a Hub data set, and the rows taken."""

    format: str | None = None
    columns: str | None = None
    keep_columns: str | None = None
    split: str | None = None
    dataset_config: str | None = None
    revision: str | None = None
    limit: int | None = None
    shard: str | None = None

    @property
    def table_options(self) -> bool:
        return any(
            (self.columns, self.keep_columns, self.split, self.dataset_config, self.revision)
        )


def open_input(source: str, modality: Modality, options: InputOptions) -> Input:
    """The reader for ``--input source``; one line (exit 2) when it cannot be read."""
    shard, shards = parse_shard(options.shard)
    if options.limit is not None and options.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {options.limit}")
    selection = Selection(options.limit, shard, shards)
    mapping = parse_mapping(options.columns, modality)
    keep = parse_keep(options.keep_columns)
    kind = options.format
    if kind is not None and kind not in FORMATS:
        raise UsageError(
            f"unknown --input-format {kind!r}", hint=f"use one of {', '.join(FORMATS)}"
        )
    from mmrun.inputs import hub

    if hub.is_hub(source) or kind == "hf":
        from mmrun.inputs.tables import Table

        files, file_kind, folder, features = hub.resolve(
            source, options.split, options.dataset_config, options.revision
        )
        return Table(
            files,
            file_kind,
            modality,
            label=source,
            base=folder,
            mapping=mapping,
            keep=keep,
            selection=selection,
            features=features,
        )
    if source == "-":
        _no_table_options(options, "a manifest on standard input")
        return Manifest(source, modality, selection)
    path = Path(source).expanduser()
    files = _files(source, path)
    kind = kind or _kind(source, path, files)
    if kind == "jsonl" or kind == "openai":
        if len(files) != 1:
            raise UsageError(f"--input {source} names {len(files)} files", hint="name one file")
        from mmrun.inputs.openai_batch import OpenAIBatch, looks_like_batch

        if kind == "openai" or looks_like_batch(files[0]):
            _no_table_options(options, "an OpenAI batch file")
            return OpenAIBatch(files[0], modality, label=source, selection=selection)
        _no_table_options(options, "a JSONL manifest")
        return Manifest(str(files[0]), modality, selection)
    if kind == "webdataset":
        from mmrun.inputs.webdataset import WebDataset

        return WebDataset(
            files, modality, label=source, mapping=mapping, keep=keep, selection=selection
        )
    from mmrun.inputs.tables import Table

    if kind == "arrow" and path.is_dir():
        files = _saved_dataset(path, options.split)
    base = path if path.is_dir() else (files[0].parent if files else Path.cwd())
    return Table(
        files,
        kind,
        modality,
        label=source,
        base=base,
        mapping=mapping,
        keep=keep,
        selection=selection,
    )


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
