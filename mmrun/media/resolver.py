"""The media resolver: each source fetched (download.py) or read (sources.py) and decoded by
its modality, in the worker pool (pool.py), within the decoding budget (budget.py). A
downloaded file that does not decode is dropped from the cache, so no later run trusts it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrun.errors import DownloadError, MediaError
from mmrun.media import objects
from mmrun.media.budget import memory_ticket, reserve
from mmrun.media.download import DOWNLOAD_WORKERS, Downloader, ProgressFn
from mmrun.media.limits import positive_number
from mmrun.media.pool import DaemonPool
from mmrun.media.sources import Source, checked_path, parse_source, read_data_uri, read_path
from mmrun.registry import Modality

PREFETCH_ENV = "MMRUN_PREFETCH_MB"
DEFAULT_PREFETCH_MB = 1024


@dataclass(frozen=True)
class MediaItem:
    """A resolved and decoded media item.

    data, info: what the modality's decoder returned (``Modality.decode``): the decoded item
        (a PIL image, an audio clip's samples, ...) and facts about it for the output.
    not_fetched: for a dry run, a default item that could not be downloaded (no network):
        why; the item is then a placeholder (no path, no data), and the request holds its name.
    """

    source: str
    path: str | None
    sha256: str
    size_bytes: int
    data: Any
    info: dict[str, Any]
    not_fetched: str | None = None


def prefetch_budget() -> int:
    """Bytes the decoded media resolved ahead of the engine may take in a batch
    (MMRUN_PREFETCH_MB)."""
    return int(positive_number(PREFETCH_ENV, DEFAULT_PREFETCH_MB, "megabytes") * 1024 * 1024)


def decoded_bytes(item: MediaItem) -> int:
    """About what an item's decoded data holds: pixels, samples or frames."""
    data = item.data[0] if isinstance(item.data, tuple) else item.data
    nbytes = getattr(data, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        width, height = data.size
        return int(width) * int(height) * len(data.getbands())
    except (AttributeError, TypeError, ValueError):
        return item.size_bytes


class MediaResolver:
    """Resolves sources concurrently: downloads share a pool, decoding runs in the workers."""

    def __init__(
        self,
        modality: Modality,
        on_request: Callable[[str], None] | None = None,
        on_progress: ProgressFn | None = None,
        placeholders: bool = False,
    ) -> None:
        """``placeholders``: a default item that cannot be downloaded becomes a placeholder
        (MediaItem.not_fetched) instead of a failure, for a dry run, which needs no network."""
        self.modality = modality
        self.placeholders = placeholders
        self.downloader = Downloader(on_request, on_progress)
        self._pool = DaemonPool(DOWNLOAD_WORKERS, "mmrun-media")

    def submit(self, texts: Sequence[str]) -> list[Future[MediaItem]]:
        sources = [parse_source(text, self.modality) for text in texts]  # bad schemes fail now
        unique: dict[str, Future[MediaItem]] = {}
        for source in sources:
            if source.text not in unique:
                unique[source.text] = self._pool.submit(self.resolve, source)
        return [unique[source.text] for source in sources]

    def resolve(self, source: Source) -> MediaItem:
        if source.kind == "object":  # decoded already, when the call gave it
            held = objects.take(source.text)
            return MediaItem(held.label, None, held.sha256, held.size_bytes, held.data, held.info)
        path: Path | None = None
        if source.make is not None and source.cache_name is not None:
            path = self.downloader.made(source.cache_name, source.make)
        elif source.kind == "asset" and self.placeholders:
            try:
                path = self.downloader.fetch(source.location, source.fallbacks, source.cache_name)
            except DownloadError as exc:
                return MediaItem(source.text, None, "", 0, None, {}, not_fetched=exc.message)
        elif source.kind in ("asset", "url"):
            path = self.downloader.fetch(source.location, source.fallbacks, source.cache_name)
        # The file's bytes and what decoding them takes share the decoding budget: twelve
        # files at the size cap are read no faster than memory allows.
        if self.modality.decode_file is not None and source.kind != "data":
            return self._resolve_file(source, path or checked_path(source))
        with memory_ticket():
            if path is not None:
                reserve(path.stat().st_size)
                data = path.read_bytes()
            elif source.kind == "data":
                data = read_data_uri(source)
                reserve(len(data))
            else:
                path = Path(source.location).expanduser()
                data = read_path(source)
            label = source.shown if source.kind != "data" else "the data: URI"
            try:
                decoded, info = self.modality.decode(data, label)
            except MediaError:
                if source.kind in ("asset", "url") and path is not None:
                    # Complete but not media (an error page served with 200, the wrong file):
                    # drop it, so that a later run fetches it again instead of trusting it.
                    path.unlink(missing_ok=True)
                raise
        return MediaItem(
            source=source.text if source.kind != "data" else source.shown,
            path=str(path) if path else None,
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            data=decoded,
            info=info,
        )

    def _resolve_file(self, source: Source, path: Path) -> MediaItem:
        """A file decoded in place (a video: only the frames it needs are read), never read
        whole into memory; the decoder reserves what it keeps from the decoding budget."""
        assert self.modality.decode_file is not None
        with memory_ticket():
            try:
                decoded, info = self.modality.decode_file(str(path), source.shown)
            except MediaError:
                if source.kind in ("asset", "url"):
                    path.unlink(missing_ok=True)  # as above: a later run fetches it again
                raise
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
        return MediaItem(
            source=source.text,
            path=str(path),
            sha256=digest.hexdigest(),
            size_bytes=path.stat().st_size,
            data=decoded,
            info=info,
        )

    def close(self) -> None:
        self._pool.shutdown()
        self.downloader.close()
