"""Media sources: resolve (asset name, path, URL, data URI), download into the cache, decode.

Downloads are bounded (timeouts, a size cap, a redirect limit, a few retries on transient
failures only), written to a temporary file and moved into the cache only when complete, and
guarded by a file lock so two processes fetching the same URL download it once. A downloaded
file that does not decode is dropped from the cache, so no later run trusts it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import stat
import threading
import urllib.parse
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.cache import CACHE_ENV, media_cache_dir
from mmrun.errors import DownloadError, MediaError
from mmrun.registry import Modality

if TYPE_CHECKING:
    import httpx

BASE_URL_ENV = "MMRUN_ASSETS_BASE_URL"
MAX_BYTES_ENV = "MMRUN_MAX_DOWNLOAD_MB"
TIMEOUT_ENV = "MMRUN_DOWNLOAD_TIMEOUT"
DEFAULT_MAX_MB = 200
DEFAULT_TIMEOUT_S = 30.0
MAX_REDIRECTS = 5
RETRIES = 3
RETRY_BACKOFF_S = 0.5  # the wait before the second try; it doubles for each further try
MAX_IMAGE_PIXELS = 178_956_970  # Pillow's own decompression-bomb threshold (2x its warning)
# Concurrent downloads: the seed's 12 default images all in flight at once.
DOWNLOAD_WORKERS = 12


@dataclass(frozen=True)
class Source:
    """Where one media item comes from: what the user typed, and how to get it."""

    text: str
    kind: str  # "asset", "path", "url", "data"
    location: str  # the URL for assets and URLs, the path for files, the URI for data
    fallbacks: tuple[str, ...] = ()  # URLs tried in order when ``location`` fails (assets)
    cache_name: str | None = None  # an asset's mirror name: its cache key, whatever its URL


@dataclass(frozen=True)
class MediaItem:
    """A resolved and decoded media item.

    data: a PIL image (RGB), or ``(waveform float32 mono, sample_rate)`` for audio.
    info: {"width", "height"} for images, {"duration_s", "sample_rate"} for audio.
    """

    source: str
    path: str | None
    sha256: str
    size_bytes: int
    data: Any
    info: dict[str, Any]


def _max_bytes() -> int:
    raw = os.environ.get(MAX_BYTES_ENV, str(DEFAULT_MAX_MB))
    try:
        return int(float(raw) * 1024 * 1024)
    except ValueError as exc:
        raise MediaError(f"{MAX_BYTES_ENV}={raw!r} is not a number of megabytes") from exc


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    try:
        return float(raw)
    except ValueError as exc:
        raise MediaError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from exc


def parse_source(text: str, modality: Modality) -> Source:
    """Classify a source: a default asset name, an http(s) URL, a data URI, or a local path."""
    assets = {asset.name: asset for asset in modality.assets}
    if text in assets:
        asset = assets[text]
        base = os.environ.get(BASE_URL_ENV)
        if base:  # the user's mirror replaces every source
            return Source(
                text, "asset", f"{base.rstrip('/')}/{asset.mirror_name}", (), asset.mirror_name
            )
        return Source(text, "asset", asset.url, asset.fallbacks, asset.mirror_name)
    if not text.strip():
        raise MediaError("an empty media source was given", hint="name a file, URL or data: URI")
    try:
        scheme = urllib.parse.urlsplit(text).scheme.lower()
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket: "http://[::1"
        raise MediaError(f"malformed URL {text!r}: {exc}", hint="check the URL") from exc
    if scheme in ("http", "https"):
        _check_url(text)
        return Source(text, "url", text)
    if scheme == "data":
        return Source(text, "data", text)
    if len(scheme) > 1 and "://" in text:
        raise MediaError(
            f"unsupported URL scheme {scheme!r} in {text!r}",
            hint="use a local path, an http(s) URL or a data: URI",
        )
    return Source(text, "path", text)


def _check_url(text: str) -> None:
    """Refuse a URL that cannot be fetched at all (no host, bad characters) before any try:
    that is the user's typo, not a network failure worth retrying."""
    import httpx

    try:
        host = httpx.URL(text).host
    except httpx.InvalidURL as exc:
        raise MediaError(f"malformed URL {text!r}: {exc}", hint="check the URL") from exc
    if not host:
        raise MediaError(f"malformed URL {text!r}: it names no host", hint="check the URL")


def _read_path(source: Source) -> bytes:
    path = Path(source.location).expanduser()
    try:
        # stat first: a FIFO would block the read forever and /dev/zero would never end it.
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise MediaError(f"{source.text} is a directory, not a file", hint="name a media file")
        if not stat.S_ISREG(mode):
            raise MediaError(
                f"{source.text} is not a regular file (a device, pipe or socket)",
                hint="name a media file",
            )
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise MediaError(f"no such file: {source.text}", hint="check the path") from exc
    except PermissionError as exc:
        raise MediaError(
            f"cannot read {source.text}: permission denied",
            hint="check its permissions and those of its folders",
        ) from exc
    except OSError as exc:
        raise MediaError(
            f"cannot read {source.text}: {exc.strerror or exc}", hint="check the file"
        ) from exc
    except ValueError as exc:  # e.g. a NUL byte, which no file name can hold
        raise MediaError(
            f"{source.text!r} is not a valid path ({exc})", hint="name a media file"
        ) from exc
    if not data:
        raise MediaError(f"{source.text} is empty (0 bytes)", hint="name a non-empty media file")
    return data


def _read_data_uri(source: Source) -> bytes:
    header, sep, payload = source.location.partition(",")
    if not sep:
        raise MediaError("malformed data: URI (no comma)", hint="use data:<type>;base64,<data>")
    try:
        if header.endswith(";base64"):
            data = base64.b64decode(payload, validate=True)
        else:
            data = urllib.parse.unquote_to_bytes(payload)
    except (binascii.Error, ValueError) as exc:
        raise MediaError(
            "malformed data: URI (bad base64)", hint="use data:<type>;base64,<data>"
        ) from exc
    if not data:
        raise MediaError("data: URI is empty", hint="put the media bytes after the comma")
    return data


def _cache_path(url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()
    name = Path(urllib.parse.urlsplit(url).path).name or "media"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in urllib.parse.unquote(name))[
        -80:
    ]
    return media_cache_dir() / digest[:2] / digest / safe


def _asset_path(mirror_name: str) -> Path:
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
        target = _cache_path(url) if cache_name is None else _asset_path(cache_name)
        if target.is_file():
            return target
        if cache_name is not None:
            # A cache from before assets were keyed by name holds them by URL.
            for old in (_cache_path(u) for u in (url, *fallbacks)):
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
            f"{first.message}; the fallback {urls[-1]} failed too: {last.message}", hint=last.hint
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
        for attempt in range(1, RETRIES + 1):
            try:
                self._attempt(url, partial, limit)
                os.replace(partial, target)
                return
            except _Transient as exc:
                failure = exc.error
            except httpx.TooManyRedirects as exc:
                raise DownloadError(
                    f"too many redirects for {url} (more than {MAX_REDIRECTS})",
                    hint="check the URL",
                ) from exc
            except (
                httpx.UnsupportedProtocol,
                httpx.InvalidURL,
            ) as exc:  # e.g. a redirect to ftp://
                raise DownloadError(f"cannot fetch {url}: {exc}", hint="check the URL") from exc
            except httpx.TimeoutException as exc:
                what = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for data"
                failure = DownloadError(
                    f"download of {url} timed out ({what})",
                    hint=f"check the network or the server; the timeout is {_timeout():g} s "
                    f"({TIMEOUT_ENV})",
                )
                failure.__cause__ = exc
            except httpx.TransportError as exc:  # refused, reset, closed mid-body: worth a retry
                failure = DownloadError(
                    f"download of {url} failed: {exc or type(exc).__name__}",
                    hint="check the network and the URL",
                )
                failure.__cause__ = exc
            except httpx.HTTPError as exc:  # e.g. a body that does not decode: not transient
                raise DownloadError(
                    f"download of {url} failed: {exc or type(exc).__name__}", hint="check the URL"
                ) from exc
            except OSError as exc:  # writing the partial file: no space, not writable
                raise _unwritable(partial.parent, exc) from exc
            finally:
                partial.unlink(missing_ok=True)
            if attempt == RETRIES:
                raise failure
            if self._cancelled.wait(delay):  # backoff, cut short when the run is stopping
                raise _cancelled(url)
            delay *= 2

    def _attempt(self, url: str, partial: Path, limit: int) -> None:
        """One try: the whole body into ``partial``, or an error (``_Transient`` if retryable)."""
        if self._cancelled.is_set():
            raise _cancelled(url)
        if self._on_request:
            self._on_request(url)
        with self._http().stream("GET", url) as response:
            status = response.status_code
            if not 200 <= status < 300:
                transient = status >= 500 or status == 429
                error = DownloadError(
                    f"download failed: HTTP {status} for {url}",
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
                        f"download of {url} was cut short ({size} of {declared} bytes)",
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
        f"download of {url} is larger than the {limit / (1024 * 1024):g} MB cap",
        hint=f"raise it with {MAX_BYTES_ENV}=<megabytes>",
    )


def _cancelled(url: str) -> DownloadError:
    return DownloadError(f"download of {url} was stopped", hint="the run is ending")


def _unwritable(folder: Path, exc: OSError) -> DownloadError:
    return DownloadError(
        f"cannot write to the cache folder {folder}: {exc.strerror or exc}",
        hint=f"free some space, or set {CACHE_ENV} to a writable folder",
    )


@functools.cache
def _quiet_pillow_bomb_warning() -> None:
    """decode_image checks the pixel count itself; Pillow's own warning, printed between
    half the limit and the limit, would only add lines to a run that succeeds."""
    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


def decode_image(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    import io

    from PIL import Image, UnidentifiedImageError

    _quiet_pillow_bomb_warning()
    try:
        with Image.open(io.BytesIO(data)) as image:
            # Checked before decoding, and here rather than through Pillow's global
            # MAX_IMAGE_PIXELS, which only errors at twice its value and warns below that.
            if image.width * image.height > MAX_IMAGE_PIXELS:
                raise _too_many_pixels(label, f"{image.width}x{image.height} pixels")
            image.load()
            # convert() copies even an RGB image (a third of the decoding time for photos).
            rgb = image if image.mode == "RGB" else image.convert("RGB")
    except MediaError:
        raise
    except Image.DecompressionBombError as exc:  # Pillow's own check, in Image.open
        raise _too_many_pixels(label, "too large") from exc
    except UnidentifiedImageError as exc:
        raise MediaError(
            f"{label} is not an image (Pillow cannot identify its format)",
            hint="give a PNG, JPEG, WebP or other Pillow-readable file",
        ) from exc
    except Exception as exc:  # on bad bytes Pillow raises OSError, SyntaxError, struct.error...
        raise MediaError(
            f"{label} is not a readable image ({exc or type(exc).__name__})",
            hint="give a PNG, JPEG, WebP or other Pillow-readable file",
        ) from exc
    return rgb, {"width": rgb.width, "height": rgb.height}


def _too_many_pixels(label: str, size: str) -> MediaError:
    return MediaError(
        f"{label} is {size}: more than the {MAX_IMAGE_PIXELS:,} pixels that mmrun "
        "decodes (a decompression bomb?)",
        hint="downscale the image first",
    )


def decode_audio(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    import io

    import soundfile

    try:
        waveform, sample_rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=False)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        # libsndfile's own words, without the "Error opening <_io.BytesIO object at 0x...>" prefix
        reason = getattr(exc, "error_string", None) or str(exc)
        raise MediaError(
            f"{label} is not readable audio ({reason})", hint="give a WAV, FLAC or Ogg file"
        ) from exc
    if waveform.ndim == 2:  # mixed down to mono, as the seed's loader (librosa) does
        waveform = waveform.mean(axis=1)
    if waveform.size == 0:
        raise MediaError(f"{label} holds no audio samples", hint="give a non-empty recording")
    return (waveform, int(sample_rate)), {
        "duration_s": round(waveform.shape[0] / sample_rate, 3),
        "sample_rate": int(sample_rate),
    }


class _DaemonPool:
    """Runs jobs on daemon threads, at most ``workers`` at a time.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so after Ctrl-C
    during a stalled download the process would hang until the download's timeout. Only
    jobs not yet finished are remembered: a batch's decoded media are not kept alive here.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._slots = threading.BoundedSemaphore(workers)
        self._name = name
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()
        self._count = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def work() -> None:
            try:
                with self._slots:
                    if not future.set_running_or_notify_cancel():  # cancelled while queued
                        return
                    try:
                        result = fn(*args)
                    except BaseException as exc:
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self._lock:
                    self._pending.discard(future)

        with self._lock:
            self._pending.add(future)
            self._count += 1
            name = f"{self._name}-{self._count}"
        threading.Thread(target=work, name=name, daemon=True).start()
        return future

    def shutdown(self) -> None:
        """Cancel the jobs not started; running ones are left to end (or die with the process)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()


class MediaResolver:
    """Resolves sources concurrently: downloads share a pool, decoding runs in the workers."""

    def __init__(
        self,
        modality: Modality,
        on_request: Callable[[str], None] | None = None,
        on_progress: ProgressFn | None = None,
    ) -> None:
        self.modality = modality
        self.downloader = Downloader(on_request, on_progress)
        self._pool = _DaemonPool(DOWNLOAD_WORKERS, "mmrun-media")

    def submit(self, texts: Sequence[str]) -> list[Future[MediaItem]]:
        sources = [parse_source(text, self.modality) for text in texts]  # bad schemes fail now
        unique: dict[str, Future[MediaItem]] = {}
        for source in sources:
            if source.text not in unique:
                unique[source.text] = self._pool.submit(self.resolve, source)
        return [unique[source.text] for source in sources]

    def resolve(self, source: Source) -> MediaItem:
        path: Path | None = None
        if source.kind in ("asset", "url"):
            path = self.downloader.fetch(source.location, source.fallbacks, source.cache_name)
            data = path.read_bytes()
        elif source.kind == "data":
            data = _read_data_uri(source)
        else:
            path = Path(source.location).expanduser()
            data = _read_path(source)
        label = source.text if source.kind != "data" else "the data: URI"
        try:
            decoded, info = self.modality.decode(data, label)
        except MediaError:
            if source.kind in ("asset", "url") and path is not None:
                # Complete but not media (an error page served with 200, the wrong file):
                # drop it, so that a later run fetches it again instead of trusting it.
                path.unlink(missing_ok=True)
            raise
        return MediaItem(
            source=source.text if source.kind != "data" else source.text[:40] + "...",
            path=str(path) if path else None,
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            data=decoded,
            info=info,
        )

    def close(self) -> None:
        self._pool.shutdown()
        self.downloader.close()
