"""Media sources: resolve (asset name, path, URL, data URI), download into the cache, decode.

Downloads are bounded (timeouts, an overall deadline, a size cap, a redirect limit, a few
retries on transient failures only), written to a temporary file and moved into the cache
only when complete, and guarded by a file lock so two processes fetching the same URL download
it once. A downloaded file that does not decode is dropped from the cache, so no later run
trusts it. Local files have a size cap too.

Decoding is bounded as well: what the libraries print while they decode is kept out of
mmrun's output (see mmrun.capture), a header that declares an image larger than its file can
hold is refused before anything is allocated, and the decodes that run at once share a memory
budget (``MMRUN_DECODE_MEMORY_MB``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import math
import os
import stat
import threading
import time
import urllib.parse
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.cache import CACHE_ENV, media_cache_dir
from mmrun.capture import Captured, library_output
from mmrun.errors import DownloadError, MediaError
from mmrun.registry import Modality

if TYPE_CHECKING:
    import httpx

BASE_URL_ENV = "MMRUN_ASSETS_BASE_URL"
MAX_BYTES_ENV = "MMRUN_MAX_DOWNLOAD_MB"
MAX_FILE_ENV = "MMRUN_MAX_FILE_MB"
TIMEOUT_ENV = "MMRUN_DOWNLOAD_TIMEOUT"
DEADLINE_ENV = "MMRUN_DOWNLOAD_DEADLINE"
DECODE_MEMORY_ENV = "MMRUN_DECODE_MEMORY_MB"
DEFAULT_MAX_MB = 200
DEFAULT_TIMEOUT_S = 30.0
# A whole download, tries and waits included: a server that sends a byte just within every
# read timeout would otherwise hold it forever. 200 MB (the size cap) at 1 MB/s fits.
DEFAULT_DEADLINE_S = 300.0
# What the decodes running at once may hold (file bytes, decoded pixels or samples); a decode
# that needs more than all of it runs alone.
DEFAULT_DECODE_MEMORY_MB = 512
PREFETCH_ENV = "MMRUN_PREFETCH_MB"
DEFAULT_PREFETCH_MB = 1024
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


def _number(name: str, default: float, unit: str) -> float:
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise MediaError(
            f"{name}={raw!r} is not a positive number of {unit}",
            hint=f"set it to e.g. {default:g}, or unset it",
        )
    return value


def _max_bytes() -> int:
    return int(_number(MAX_BYTES_ENV, DEFAULT_MAX_MB, "megabytes") * 1024 * 1024)


def _timeout() -> float:
    return _number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, "seconds")


def _deadline() -> float:
    return _number(DEADLINE_ENV, DEFAULT_DEADLINE_S, "seconds")


def _decode_memory() -> int:
    return int(_number(DECODE_MEMORY_ENV, DEFAULT_DECODE_MEMORY_MB, "megabytes") * 1024 * 1024)


def prefetch_budget() -> int:
    """Bytes the decoded media resolved ahead of the engine may take in a batch
    (MMRUN_PREFETCH_MB)."""
    return int(_number(PREFETCH_ENV, DEFAULT_PREFETCH_MB, "megabytes") * 1024 * 1024)


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
        cap_mb = _number(MAX_FILE_ENV, DEFAULT_MAX_MB, "megabytes")
        limit = int(cap_mb * 1024 * 1024)
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > limit:
                raise _file_too_big(source.text, size, cap_mb)
            _reserve(size)
            data = file.read(limit + 1)  # a file that grew meanwhile still stops at the cap
        if len(data) > limit:
            raise _file_too_big(source.text, len(data), cap_mb)
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


def _file_too_big(text: str, size: int, cap_mb: float) -> MediaError:
    return MediaError(
        f"{text} is {size / (1024 * 1024):,.1f} MB: more than the {cap_mb:g} MB "
        "that mmrun reads from a local file",
        hint=f"raise the cap with {MAX_FILE_ENV}=<megabytes>",
    )


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


def _too_slow(url: str) -> DownloadError:
    return DownloadError(
        f"download of {url} did not finish within {_deadline():g} s",
        hint=f"the server is too slow; raise the limit with {DEADLINE_ENV}=<seconds>",
    )


def _cancelled(url: str) -> DownloadError:
    return DownloadError(f"download of {url} was stopped", hint="the run is ending")


def _unwritable(folder: Path, exc: OSError) -> DownloadError:
    return DownloadError(
        f"cannot write to the cache folder {folder}: {exc.strerror or exc}",
        hint=f"free some space, or set {CACHE_ENV} to a writable folder",
    )


# --- The memory budget of decoding ------------------------------------------------------------


class _Ticket:
    """What one resolve (or one decode called on its own) holds of the budget."""

    def __init__(self) -> None:
        self.held = 0


class _MemoryBudget:
    """The bytes that the decodes running at once may hold, shared by the worker threads.

    A reservation waits until it fits beside what the others hold. One that cannot fit goes
    ahead when no other decode is running (all of them wait or hold nothing), the first to ask
    first: so nothing waits forever, and the peak is the budget or the largest single decode.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = 0
        self._running = 0  # tickets holding bytes and not waiting for more
        self._queue: deque[_Ticket] = deque()

    def reserve(self, ticket: _Ticket, nbytes: int) -> None:
        limit = _decode_memory()
        with self._cond:
            if ticket.held:  # waiting from now on: another waiter may be next, if none runs
                self._running -= 1
                self._cond.notify_all()
            self._queue.append(ticket)
            try:
                while not (
                    self._held + nbytes <= limit
                    or (self._running == 0 and self._queue[0] is ticket)
                ):
                    self._cond.wait()
            finally:
                self._queue.remove(ticket)
                if ticket.held or nbytes:
                    self._running += 1
                self._cond.notify_all()
            self._held += nbytes
            ticket.held += nbytes

    def release(self, ticket: _Ticket) -> None:
        with self._cond:
            if not ticket.held:
                return
            if ticket.held >= _TRIM_AFTER:
                _give_back_freed_memory()
            self._held -= ticket.held
            self._running -= 1
            ticket.held = 0
            self._cond.notify_all()


# Pillow allocates an image in blocks that glibc's malloc serves from the arena of the thread
# that decodes, and keeps there once freed: without this, six failed decodes of 170 MB each,
# one after the other in six threads, still held 1 GB. So after a large decode, the freed
# memory goes back to the system before the next one starts.
_TRIM_AFTER = 32 << 20


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None
    return trim


def _give_back_freed_memory() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


_budget = _MemoryBudget()
_tickets = threading.local()


@contextmanager
def _memory_ticket(initial: int = 0) -> Iterator[None]:
    """Hold a share of the decoding budget until the block ends; ``initial`` bytes at once.
    Inside a block that holds one already (a resolve), this thread's ticket is that one."""
    if getattr(_tickets, "current", None) is not None:
        yield
        return
    ticket = _Ticket()
    _tickets.current = ticket
    try:
        if initial:
            _budget.reserve(ticket, initial)
        yield
    finally:
        _tickets.current = None
        _budget.release(ticket)


def _reserve(nbytes: int) -> None:
    """Add ``nbytes`` to this thread's share of the budget, waiting for room if need be."""
    ticket: _Ticket | None = getattr(_tickets, "current", None)
    if ticket is not None and nbytes > 0:
        _budget.reserve(ticket, nbytes)


def _forget_locals(exc: Exception) -> Exception:
    """``exc``, without the local variables of the frames it was raised through: a failed
    decode's half-decoded image (hundreds of MB) would otherwise live as long as the error,
    which the run keeps until it ends. The traceback itself stays, for MMRUN_DEBUG."""
    import traceback

    traceback.clear_frames(exc.__traceback__)
    return exc


# --- Images -------------------------------------------------------------------------------------


@functools.cache
def _quiet_pillow_bomb_warning() -> None:
    """decode_image checks the pixel count itself; Pillow's own warning, printed between
    half the limit and the limit, would only add lines to a run that succeeds."""
    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


# The most pixels that one byte of a Pillow decoder's input can give, at the densest its
# encoding allows (1-bit pixels, the longest run, deflate's best ratio): a header that declares
# more pixels than its file can hold is damaged, and is refused before Pillow allocates the
# image. Decoders not listed (FLI, JPEG, libtiff, BMP's RLE, ...) can encode a plain image in
# next to nothing; the memory budget bounds those.
_MAX_PIXELS_PER_BYTE = {
    "raw": 8,  # uncompressed
    "dds_rgb": 8,  # DDS with bit masks, uncompressed
    "bcn": 2,  # DDS block compression: 16 pixels in 8 bytes
    "BLP1": 2,  # BLP paletted or DXT (JPEG-compressed BLP is not bounded: see below)
    "BLP2": 2,
    "packbits": 8 * 64,  # 128 bytes from a 2-byte run
    "tga_rle": 64,  # 128 pixels from a 2-byte packet
    "sgi_rle": 8 * 64,
    "pcx": 8 * 32,  # 63 bytes from a 2-byte run
    "zip": 8 * 1032,  # PNG: deflate turns 1 byte into at most 1032
    "gif": 4096,  # an LZW code stands for at most 4096 pixels
}
_JPEG_BLP = 0  # BLP's compression field for JPEG data (Pillow's BlpImagePlugin.Format.JPEG)
# Formats whose tiles read the file itself. Others (AVIF, WebP, ICO, ...) decode it whole and
# then read the decoded pixels through a tile: their tiles say nothing about the file.
_TILES_READ_THE_FILE = frozenset(
    [
        "BLP",
        "BMP",
        "DIB",
        "DDS",
        "GIF",
        "IM",
        "MSP",
        "PCX",
        "PNG",
        "PPM",
        "PSD",
        "SGI",
        "TGA",
        "TIFF",
    ]
)
# Bytes per pixel of Pillow's storage for a mode (modes of several bands take 4).
_STORED_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}


def _check_declared_size(image: Any, size: int, label: str) -> None:
    """Refuse an image whose header declares more pixels than the file can hold."""
    if image.format not in _TILES_READ_THE_FILE:
        return
    for tile in image.tile:
        codec, extents, offset = tile[0], tile[1], tile[2]
        args = tile[3] if len(tile) > 3 else None
        ratio = _MAX_PIXELS_PER_BYTE.get(codec)
        if ratio is None or extents is None:
            continue
        if codec in ("BLP1", "BLP2") and isinstance(args, tuple) and args[:1] == (_JPEG_BLP,):
            continue
        x0, y0, x1, y1 = extents
        pixels = max(0, x1 - x0) * max(0, y1 - y0)
        needed = (offset or 0) + pixels // ratio
        if needed > size:
            raise MediaError(
                f"{label} is damaged: its header declares a {image.width}x{image.height} "
                f"{image.format or ''} image, which needs at least {needed:,} bytes; "
                f"the file has {size:,}",
                hint="check the file, or export it again",
            )


def _decode_bytes(image: Any) -> int:
    """About what decoding ``image`` and converting it to RGB allocates."""
    width, height = image.size
    pixels = width * height
    lines = 8 * height  # Pillow keeps a pointer per row: for a tall, narrow image that counts
    cost = pixels * _STORED_BYTES.get(image.mode, 4) + lines
    if image.mode != "RGB":
        cost += pixels * 4 + lines
    if image.format == "JPEG" and image.info.get("progressive"):
        cost += pixels * 6  # libjpeg keeps every coefficient of a progressive image
    return int(cost)


def decode_image(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    _quiet_pillow_bomb_warning()
    with _memory_ticket(len(data)):
        failure: Exception | None = None
        with library_output() as said:
            try:
                rgb = _decode_image(data, label)
            except Exception as exc:
                failure = exc
    if failure is not None:
        raise _image_error(failure, label, said) from _forget_locals(failure)
    return rgb, {"width": rgb.width, "height": rgb.height}


def _decode_image(data: bytes, label: str) -> Any:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        # Checked before decoding, and here rather than through Pillow's global
        # MAX_IMAGE_PIXELS, which only errors at twice its value and warns below that.
        if image.width * image.height > MAX_IMAGE_PIXELS:
            raise _too_many_pixels(label, f"{image.width}x{image.height} pixels")
        _check_declared_size(image, len(data), label)
        _reserve(_decode_bytes(image))
        image.load()
        # convert() copies even an RGB image (a third of the decoding time for photos).
        return image if image.mode == "RGB" else image.convert("RGB")


_IMAGE_HINT = "give a PNG, JPEG, WebP or other Pillow-readable file"


def _image_error(exc: Exception, label: str, said: Captured) -> MediaError:
    from PIL import Image, UnidentifiedImageError

    if isinstance(exc, MediaError):
        return exc
    if isinstance(exc, Image.DecompressionBombError):  # Pillow's own check, in Image.open
        return _too_many_pixels(label, "too large")
    if isinstance(exc, UnidentifiedImageError):
        return MediaError(
            f"{label} is not an image (Pillow cannot identify its format)", hint=_IMAGE_HINT
        )
    if isinstance(exc, MemoryError):
        return MediaError(
            f"{label} is too large to decode in the memory available", hint="downscale it first"
        )
    # On bad bytes Pillow raises OSError, SyntaxError, struct.error, ValueError...
    reason = said.failure or str(exc) or type(exc).__name__
    return MediaError(f"{label} is not a readable image ({reason})", hint=_IMAGE_HINT)


def _too_many_pixels(label: str, size: str) -> MediaError:
    return MediaError(
        f"{label} is {size}: more than the {MAX_IMAGE_PIXELS:,} pixels that mmrun "
        "decodes (a decompression bomb?)",
        hint="downscale the image first",
    )


# --- Audio --------------------------------------------------------------------------------------

AUDIO_HINT = "give a WAV, FLAC, MP3, Ogg (Vorbis or Opus) or AIFF file"
_CONVERT_HINT = "convert it to WAV or FLAC first, e.g. `ffmpeg -i <file> out.wav`"
# Sample rates outside this range are a damaged header, not a recording (libsndfile reads an
# AIFF rate of 0 as 1 Hz, and accepts 800 MHz).
MIN_SAMPLE_RATE = 1_000
MAX_SAMPLE_RATE = 768_000
# Frames read at a time once a file holds more than its header declared.
_AUDIO_BLOCK = 1 << 20
# More frames per byte than any encoding gives (FLAC's constant blocks of silence come closest,
# at a few thousand): a header that declares more describes another file.
_MAX_FRAMES_PER_BYTE = 1 << 16
_UNKNOWN_FRAMES = (1 << 63) - 1  # libsndfile's SF_COUNT_MAX: a length it could not find


def _sniff_audio(data: bytes) -> tuple[str | None, bool]:
    """The container a file's first bytes name, and whether libsndfile decodes it."""
    head = data[:64]
    if head[:4] in (b"RIFF", b"RIFX") and head[8:12] == b"WAVE":
        return "WAV", True
    if head[:4] == b"RF64":
        return "RF64 WAV", True
    if head[:4] == b"riff":
        return "Wave64", True
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF", True
    if head[:4] == b"fLaC":
        return "FLAC", True
    if head[:4] == b"OggS":
        for marker, name, decodes in (
            (b"OpusHead", "Ogg Opus", True),
            (b"\x01vorbis", "Ogg Vorbis", True),
            (b"\x7fFLAC", "Ogg FLAC", True),
            (b"Speex   ", "Ogg Speex", False),
            (b"\x80theora", "Ogg Theora video", False),
        ):
            if marker in head:
                return name, decodes
        return "Ogg", True
    if head[:4] == b".snd":
        return "AU", True
    if head[:4] == b"caff":
        return "CAF", True
    if head[4:8] == b"ftyp":
        return "MP4/M4A (AAC or ALAC)", False
    if head[:5] == b"#!AMR":
        return "AMR", False
    if head[:4] == b"wvpk":
        return "WavPack", False
    if head[:4] == b"MAC ":
        return "Monkey's Audio", False
    if head[:4] == b"\x30\x26\xb2\x75":
        return "WMA/ASF", False
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "Matroska/WebM", False
    if head[:4] == b"MThd":
        return "MIDI (notes, not sound)", False
    if head[:4] == b"ADIF" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0):
        return "AAC", False
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3", True
    return None, False


# libsndfile's words for what is wrong with a file it knows, in mmrun's. Its own messages are
# sometimes wrong for a file held in memory ("File does not exist or is not a regular file
# (possibly a pipe?)" for an MP3 without a decodable frame; "Unspecified internal error." for
# a header that points past the end).
_LIBSNDFILE_REASONS = (
    ("data' chunk", "it has no audio data chunk"),
    ("channel", "its header gives an invalid number of channels"),
    ("fmt ' chunk", "its format header is malformed"),
    ("SF_INFO struct incomplete", "its header gives no usable sample rate or channel count"),
    ("flac decoder", "its FLAC stream is corrupt"),
    ("psf_fseek", "its header and its data disagree"),
    ("not a regular file", "no audio frame in it can be decoded"),
)


def _audio_error(exc: Exception, data: bytes, label: str, said: Captured) -> MediaError:
    import soundfile

    if isinstance(exc, MediaError):
        return exc
    if isinstance(exc, MemoryError):
        return MediaError(
            f"{label} is too long to decode in the memory available", hint="trim it first"
        )
    container, decodes = _sniff_audio(data)
    if container is not None and not decodes:
        return MediaError(f"{label} is {container}, which mmrun cannot decode", hint=_CONVERT_HINT)
    code = exc.code if isinstance(exc, soundfile.LibsndfileError) else None
    words = exc.error_string if isinstance(exc, soundfile.LibsndfileError) else str(exc)
    if code == 1 or container is None:  # SF_ERR_UNRECOGNISED_FORMAT
        return MediaError(f"{label} is not audio in a format mmrun reads", hint=AUDIO_HINT)
    if "unimplemented format" in words:
        return MediaError(
            f"{label} is {container} that mmrun cannot decode: an encoding libsndfile does "
            "not implement, or a damaged file",
            hint=_CONVERT_HINT,
        )
    if said.failure is not None:  # libsndfile asked its file for a position before the start
        reason = "its header and its data disagree"
    else:
        reason = next(
            (mine for theirs, mine in _LIBSNDFILE_REASONS if theirs.lower() in words.lower()),
            "its header or data cannot be read",
        )
    return MediaError(
        f"{label} is a damaged or truncated {container} file: {reason}",
        hint="check the file, or export it again",
    )


class _AudioBytes:
    """The file object soundfile reads through libsndfile's virtual I/O.

    On some malformed headers libsndfile asks to seek before the start; a BytesIO raises
    there, inside a C callback where nothing can catch it, and Python prints the traceback.
    This one stays where it is, which libsndfile reads as a failed seek."""

    def __init__(self, data: bytes) -> None:
        import io

        self._file = io.BytesIO(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self._file.seek(offset, whence)
        except (ValueError, OverflowError):
            return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def readinto(self, buffer: Any) -> int:
        return self._file.readinto(buffer)


def decode_audio(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    with _memory_ticket(len(data)):
        failure: Exception | None = None
        with library_output() as said:
            try:
                waveform, sample_rate = _decode_audio(data, label)
            except Exception as exc:
                failure = exc
    if failure is not None:
        raise _audio_error(failure, data, label, said) from _forget_locals(failure)
    return (waveform, sample_rate), {
        "duration_s": round(waveform.shape[0] / sample_rate, 3),
        "sample_rate": sample_rate,
    }


def _decode_audio(data: bytes, label: str) -> tuple[Any, int]:
    import numpy as np
    import soundfile

    with soundfile.SoundFile(_AudioBytes(data)) as audio:
        rate, channels = int(audio.samplerate), int(audio.channels)
        if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
            container = _sniff_audio(data)[0] or "audio"
            raise MediaError(
                f"{label} is a damaged {container} file: its header gives a sample rate of "
                f"{rate:,} Hz",
                hint=f"mmrun reads {MIN_SAMPLE_RATE:,} to {MAX_SAMPLE_RATE:,} Hz; check the file",
            )
        # The frame count comes from the header, and a damaged one can declare 2^36 frames:
        # read what the file holds, never more than what it could hold at 1 bit a frame.
        declared = max(0, int(audio.frames))
        if declared >= _UNKNOWN_FRAMES:  # libsndfile does not know: blocks until the end
            declared = 0
        elif declared > _MAX_FRAMES_PER_BYTE * len(data):
            container = _sniff_audio(data)[0] or "audio"
            raise MediaError(
                f"{label} is a damaged {container} file: its header declares {declared:,} "
                f"frames, more than {len(data):,} bytes can hold",
                hint="check the file, or export it again",
            )
        first = min(declared, 8 * len(data) // max(channels, 1)) or _AUDIO_BLOCK
        _reserve(first * channels * 4 * 2)  # the samples, and their mono mix
        pieces = [audio.read(first, dtype="float32", always_2d=True)]
        while len(pieces[-1]) == (first if len(pieces) == 1 else _AUDIO_BLOCK):
            _reserve(_AUDIO_BLOCK * channels * 4 * 2)
            pieces.append(audio.read(_AUDIO_BLOCK, dtype="float32", always_2d=True))
    frames = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    # Mixed down to mono, as the seed's loader (librosa) does.
    waveform = frames[:, 0] if channels == 1 else frames.mean(axis=1, dtype=np.float32)
    if waveform.size == 0:
        raise MediaError(f"{label} holds no audio samples", hint="give a non-empty recording")
    if not np.isfinite(waveform).all():
        raise MediaError(
            f"{label} holds invalid samples (not-a-number or infinite values)",
            hint="check the file, or export it again",
        )
    return np.ascontiguousarray(waveform), rate


class _DaemonPool:
    """Runs jobs on at most ``workers`` daemon threads, started as jobs come and ended after
    ``IDLE_S`` without one.

    Not a ThreadPoolExecutor: the interpreter joins those threads at exit, so after Ctrl-C
    during a stalled download the process would hang until the download's timeout. Not a
    thread per job either: starting 256 threads (a 64 x 4-image run) took 0.7 s before the
    engine could start, on 2 busy cores. Only jobs not yet started are remembered: a batch's
    decoded media are not kept alive here.
    """

    IDLE_S = 5.0

    def __init__(self, workers: int, name: str) -> None:
        self._workers = max(1, workers)
        self._name = name
        self._jobs: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._threads = 0
        self._idle = 0
        self._started = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._wake:
            self._jobs.append((future, fn, args))
            if self._idle > len(self._jobs) - 1:
                self._wake.notify()
            elif self._threads < self._workers:
                self._threads += 1
                self._started += 1
                name = f"{self._name}-{self._started}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._jobs:
                    self._idle += 1
                    woken = self._wake.wait(self.IDLE_S)
                    self._idle -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                future, fn, args = self._jobs.popleft()
                # marked running under the lock: shutdown() cancels exactly what is queued
                running = future.set_running_or_notify_cancel()  # False: cancelled
            if running:
                try:
                    result = fn(*args)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args  # nothing of a finished job kept while idle

    def shutdown(self) -> None:
        """Cancel the jobs not started; running ones are left to end (or die with the process)."""
        with self._wake:
            queued = [future for future, _, _ in self._jobs]
        for future in queued:
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
        # The file's bytes and what decoding them takes share the decoding budget: twelve
        # files at the size cap are read no faster than memory allows.
        with _memory_ticket():
            if path is not None:
                _reserve(path.stat().st_size)
                data = path.read_bytes()
            elif source.kind == "data":
                data = _read_data_uri(source)
                _reserve(len(data))
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
