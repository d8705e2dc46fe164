"""Downloads into the media cache.

Downloads are bounded (timeouts, an overall deadline, a size cap, a redirect limit, a few
retries on transient failures only), written to a temporary file and moved into the cache
only when complete, and guarded by a file lock so two processes fetching the same URL download
it once.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mmrun.cache import CACHE_ENV, media_cache_dir
from mmrun.errors import DownloadError, shown
from mmrun.media.limits import DEFAULT_MAX_MB, positive_number

if TYPE_CHECKING:
    import httpx

MAX_BYTES_ENV = "MMRUN_MAX_DOWNLOAD_MB"
TIMEOUT_ENV = "MMRUN_DOWNLOAD_TIMEOUT"
DEADLINE_ENV = "MMRUN_DOWNLOAD_DEADLINE"
DEFAULT_TIMEOUT_S = 30.0
# A whole download, tries and waits included: a server that sends a byte just within every
# read timeout would otherwise hold it forever. 200 MB (the size cap) at 1 MB/s fits.
DEFAULT_DEADLINE_S = 300.0
MAX_REDIRECTS = 5
RETRIES = 3
RETRY_BACKOFF_S = 0.5  # the wait before the second try; it doubles for each further try
# Concurrent downloads: the 12 default images of vLLM's example all in flight at once.
DOWNLOAD_WORKERS = 12


def _max_bytes() -> int:
    return int(positive_number(MAX_BYTES_ENV, DEFAULT_MAX_MB, "megabytes") * 1024 * 1024)


def _timeout() -> float:
    return positive_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, "seconds")


def _deadline() -> float:
    return positive_number(DEADLINE_ENV, DEFAULT_DEADLINE_S, "seconds")


def cache_path(url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()
    name = Path(urllib.parse.urlsplit(url).path).name or "media"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in urllib.parse.unquote(name))[
        -80:
    ]
    return media_cache_dir() / digest[:2] / digest / safe


def asset_path(mirror_name: str) -> Path:
    """A default asset's cache file: keyed by its mirror name, not by the URL it came from."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in mirror_name)[-80:] or "media"
    return media_cache_dir() / "assets" / safe / safe


# Told of each chunk a download receives: (url, bytes so far, total bytes if the server said).
ProgressFn = Callable[[str, int, "int | None"], None]


class Downloader:
    """Fetches URLs into the cache, sharing one HTTP connection pool between threads."""

    def __init__(
        self, on_request: Callable[[str], None] | None = None, on_progress: ProgressFn | None = None
    ) -> None:
        self._client: httpx.Client | None = None
        self._on_request = on_request
        self._on_progress = on_progress
        self._cancelled = threading.Event()
        self._client_lock = threading.Lock()

    def _http(self) -> httpx.Client:
        # One client for all workers (its connection pool is the point): the lock stops
        # workers that start together from each building their own.
        with self._client_lock:
            if self._client is None:
                import httpx

                timeout = _timeout()
                self._client = httpx.Client(
                    follow_redirects=True,
                    max_redirects=MAX_REDIRECTS,
                    timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                    headers={"User-Agent": "mmrun (https://github.com/mmrun)"},
                    limits=httpx.Limits(max_connections=DOWNLOAD_WORKERS),
                )
            return self._client

    def close(self) -> None:
        """Stop: downloads still running give up at their next chunk or retry."""
        self._cancelled.set()
        if self._client is not None:
            self._client.close()

    def fetch(self, url: str, fallbacks: Sequence[str] = (), cache_name: str | None = None) -> Path:
        """The cached file for ``url``, downloading it first if needed, from ``fallbacks`` in
        order when ``url`` fails. ``cache_name``: a default asset's mirror name, its cache key."""
        target = cache_path(url) if cache_name is None else asset_path(cache_name)
        if target.is_file():
            return target
        if cache_name is not None:
            # A cache from before assets were keyed by name holds them by URL.
            for old in (cache_path(u) for u in (url, *fallbacks)):
                if old.is_file():
                    return old
        from filelock import FileLock

        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(target.parent / ".lock"))
            lock.acquire()
        except OSError as exc:
            raise _unwritable(target.parent, exc) from exc
        try:
            if target.is_file():  # another process finished it while we waited
                return target
            self._download_first((url, *fallbacks), target)
        finally:
            lock.release()
        return target

    def made(self, cache_name: str, make: Callable[[Path], None]) -> Path:
        """The cached file of a default item mmrun writes itself (``Asset.make``), written
        first if needed, as a download is: to a temporary file, moved in when complete."""
        target = asset_path(cache_name)
        if target.is_file():
            return target
        from filelock import FileLock

        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(target.parent / ".lock")):
                if not target.is_file():
                    partial = target.with_name(
                        f".{os.getpid()}.{threading.get_ident()}.{target.name}"
                    )
                    try:
                        make(partial)
                        os.replace(partial, target)
                    finally:
                        partial.unlink(missing_ok=True)
        except OSError as exc:
            raise _unwritable(target.parent, exc) from exc
        return target

    def _download_first(self, urls: Sequence[str], target: Path) -> None:
        """Download from the first URL that works; the first failure is the one reported."""
        failures: list[DownloadError] = []
        for url in urls:
            try:
                self._download(url, target)
                return
            except DownloadError as exc:
                if self._cancelled.is_set():
                    raise
                failures.append(exc)
        first, last = failures[0], failures[-1]
        if len(failures) == 1:
            raise first
        raise DownloadError(
            f"{first.message}; the fallback {shown(urls[-1])} failed too: {last.message}",
            hint=last.hint,
        ) from first

    def _download(self, url: str, target: Path) -> None:
        import httpx

        limit = _max_bytes()
        # Whoever holds the lock is the only writer, so any partial file here was left by a
        # run that was killed mid-download: remove it rather than let it pile up.
        for stale in target.parent.glob(f".{target.name}.*.part"):
            stale.unlink(missing_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
        delay = RETRY_BACKOFF_S
        deadline = time.monotonic() + _deadline()
        for attempt in range(1, RETRIES + 1):
            try:
                self._attempt(url, partial, limit, deadline)
                os.replace(partial, target)
                return
            except _Transient as exc:
                failure = exc.error
            except httpx.TooManyRedirects as exc:
                raise DownloadError(
                    f"too many redirects for {shown(url)} (more than {MAX_REDIRECTS})",
                    hint="check the URL",
                ) from exc
            except (
                httpx.UnsupportedProtocol,
                httpx.InvalidURL,
            ) as exc:  # e.g. a redirect to ftp://
                raise DownloadError(
                    f"cannot fetch {shown(url)}: {exc}", hint="check the URL"
                ) from exc
            except httpx.TimeoutException as exc:
                what = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for data"
                failure = DownloadError(
                    f"download of {shown(url)} timed out ({what})",
                    hint=f"check the network or the server; the timeout is {_timeout():g} s "
                    f"({TIMEOUT_ENV})",
                )
                failure.__cause__ = exc
            except httpx.TransportError as exc:  # refused, reset, closed mid-body: worth a retry
                failure = DownloadError(
                    f"download of {shown(url)} failed: {exc or type(exc).__name__}",
                    hint="check the network and the URL",
                )
                failure.__cause__ = exc
            except httpx.HTTPError as exc:  # e.g. a body that does not decode: not transient
                raise DownloadError(
                    f"download of {shown(url)} failed: {exc or type(exc).__name__}",
                    hint="check the URL",
                ) from exc
            except OSError as exc:  # writing the partial file: no space, not writable
                raise _unwritable(partial.parent, exc) from exc
            finally:
                partial.unlink(missing_ok=True)
            now = time.monotonic()
            if now >= deadline:
                raise _too_slow(url) from failure
            if attempt == RETRIES or now + delay >= deadline:
                raise failure
            if self._cancelled.wait(delay):  # backoff, cut short when the run is stopping
                raise _cancelled(url)
            delay *= 2

    def _attempt(self, url: str, partial: Path, limit: int, deadline: float) -> None:
        """One try: the whole body into ``partial``, or an error (``_Transient`` if retryable)."""
        import httpx

        if self._cancelled.is_set():
            raise _cancelled(url)
        if self._on_request:
            self._on_request(url)
        # No single wait may run past the deadline either.
        wait = max(0.1, min(_timeout(), deadline - time.monotonic()))
        timeout = httpx.Timeout(wait, connect=min(wait, 10.0))
        with self._http().stream("GET", url, timeout=timeout) as response:
            status = response.status_code
            if not 200 <= status < 300:
                transient = status >= 500 or status == 429
                error = DownloadError(
                    f"download failed: HTTP {status} for {shown(url)}",
                    hint="the server failed; try again later" if transient else "check the URL",
                )
                if transient:
                    raise _Transient(error)
                raise error
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise _too_big(url, limit)
            size = 0
            with open(partial, "wb") as out:
                for chunk in response.iter_bytes():  # as they arrive: cap and stop act at once
                    if self._cancelled.is_set():
                        raise _cancelled(url)
                    if time.monotonic() > deadline:  # a server that trickles
                        raise _too_slow(url)
                    size += len(chunk)
                    if size > limit:  # also without a Content-Length, or when it lies
                        raise _too_big(url, limit)
                    out.write(chunk)
                    if self._on_progress is not None:
                        self._on_progress(
                            url, size, int(declared) if declared and declared.isdigit() else None
                        )
                out.flush()
                os.fsync(out.fileno())
            if declared and declared.isdigit() and size != int(declared):
                raise _Transient(
                    DownloadError(
                        f"download of {shown(url)} was cut short ({size} of {declared} bytes)",
                        hint="try again",
                    )
                )


class _Transient(Exception):
    """A failed try worth repeating (HTTP 5xx or 429, a body cut short)."""

    def __init__(self, error: DownloadError) -> None:
        super().__init__(str(error))
        self.error = error


def _too_big(url: str, limit: int) -> DownloadError:
    return DownloadError(
        f"download of {shown(url)} is larger than the {limit / (1024 * 1024):g} MB cap",
        hint=f"raise it with {MAX_BYTES_ENV}=<megabytes>",
    )


def _too_slow(url: str) -> DownloadError:
    return DownloadError(
        f"download of {shown(url)} did not finish within {_deadline():g} s",
        hint=f"the server is too slow; raise the limit with {DEADLINE_ENV}=<seconds>",
    )


def _cancelled(url: str) -> DownloadError:
    return DownloadError(f"download of {shown(url)} was stopped", hint="the run is ending")


def _unwritable(folder: Path, exc: OSError) -> DownloadError:
    return DownloadError(
        f"cannot write to the cache folder {folder}: {exc.strerror or exc}",
        hint=f"free some space, or set {CACHE_ENV} to a writable folder",
    )
