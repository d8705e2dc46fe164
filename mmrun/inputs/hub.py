"""Hugging Face Hub data sets (``hf://datasets/ORG/NAME``) as tables: the repository's files
come through the Hugging Face cache (so ``HF_HUB_OFFLINE=1`` with the data set downloaded
beforehand works), ``datasets`` says which of them hold the split of the config asked for,
and pyarrow reads them as any local table (by row group, bounded memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.errors import DownloadError, MissingDependencyError, UsageError
from mmrun.hub_access import hub_cache_dir

PREFIX = "hf://datasets/"
# datasets' packaged builders mmrun reads with its own table readers.
READERS = {"parquet": "parquet", "arrow": "arrow", "csv": "csv"}


def is_hub(text: str) -> bool:
    return text.startswith(PREFIX)


def repo_of(text: str) -> str:
    repo = (text[len(PREFIX) :] if is_hub(text) else text).strip("/")  # or --input-format hf
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UsageError(
            f"invalid data set {text!r}", hint="write hf://datasets/ORG/NAME, e.g. --split test"
        )
    return repo


def resolve(
    text: str, split: str | None, config: str | None, revision: str | None
) -> tuple[list[Path], str, Path, dict[str, str]]:
    """The split's files, their format, the folder relative paths in cells are relative to,
    and the features the data set card declares (column -> "Image", "Audio", ...)."""
    from mmrun.hub_access import check_reachable

    repo = repo_of(text)
    split = split or "train"
    check_reachable(f"data set {repo}", f"the {split} split")
    folder = _snapshot(repo, revision)
    try:
        import datasets
    except ImportError as exc:
        raise MissingDependencyError(
            "reading a Hugging Face Hub data set needs the datasets package",
            hint="pip install 'mmrun[datasets]'",
        ) from exc
    try:
        builder = datasets.load_dataset_builder(str(folder), name=config)
    except (ValueError, FileNotFoundError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{text}: {first}", hint="check --dataset-config") from exc
    files = (builder.config.data_files or {}).get(split)
    if not files:
        splits = ", ".join(builder.config.data_files or {}) or "none"
        raise UsageError(f"{text} has no split {split!r}", hint=f"its splits: {splits}")
    kind = READERS.get(type(builder).__module__.rsplit(".", 1)[-1]) or _kind_of(files)
    features = {}
    for name, feature in (builder.info.features or {}).items():
        feature = feature[0] if isinstance(feature, list) and feature else feature
        features[name] = type(getattr(feature, "feature", feature)).__name__
    paths = [Path(f) for f in files]
    # Relative paths in cells are relative to the file that holds them, as for local tables.
    return paths, kind, paths[0].parent, features


def _kind_of(files: list[Any]) -> str:
    suffixes = {Path(str(f)).suffix.lower() for f in files}
    for suffix, kind in ((".parquet", "parquet"), (".arrow", "arrow"), (".csv", "csv")):
        if suffixes == {suffix}:
            return kind
    raise UsageError(
        f"mmrun reads data sets stored as Parquet, Arrow or CSV, not {', '.join(sorted(suffixes))}",
        hint="convert it, or download it and pass the files with --input",
    )


def _snapshot(repo: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from mmrun.hub_access import offline

    try:
        path = snapshot_download(
            repo_id=repo,
            repo_type="dataset",
            revision=revision,
            cache_dir=hub_cache_dir(),
            local_files_only=offline(),
        )
        return Path(path)
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise UsageError(
            f"no data set {repo}"
            + (f" at revision {revision}" if revision else "")
            + " on the Hugging Face Hub",
            hint="check the name and --revision (a private one needs `hf auth login`)",
        ) from exc
    except LocalEntryNotFoundError as exc:
        raise DownloadError(
            f"the data set {repo} is not in the Hugging Face cache",
            hint="download it first (hf download --repo-type dataset " + repo + "), "
            "or unset HF_HUB_OFFLINE",
        ) from exc
    except OSError as exc:
        raise DownloadError(f"cannot fetch the data set {repo}: {exc}") from exc
