"""Media sources: resolve (asset name, path, URL, data URI), download into the cache, decode.

Downloads are bounded (timeouts, a size cap, a redirect limit, a few retries on transient
failures only), written to a temporary file and moved into the cache only when complete, and
guarded by a file lock so two processes fetching the same URL download it once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.cache import media_cache_dir
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
MAX_IMAGE_PIXELS = 178_956_970  # Pillow's own decompression-bomb threshold (2x its warning)
DOWNLOAD_WORKERS = 8


@dataclass(frozen=True)
class Source:
    """Where one media item comes from: what the user typed, and how to get it."""

    text: str
    kind: str  # "asset", "path", "url", "data"
    location: str  # the URL for assets and URLs, the path for files, the URI for data


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
        url = f"{base.rstrip('/')}/{asset.mirror_name}" if base else asset.url
        return Source(text, "asset", url)
    scheme = urllib.parse.urlsplit(text).scheme.lower()
    if scheme in ("http", "https"):
        return Source(text, "url", text)
    if scheme == "data":
        return Source(text, "data", text)
    if len(scheme) > 1 and "://" in text:
        raise MediaError(
            f"unsupported URL scheme {scheme!r} in {text!r}",
            hint="use a local path, an http(s) URL or a data: URI",
        )
    return Source(text, "path", text)


def _read_path(source: Source) -> bytes:
    path = Path(source.location).expanduser()
    if not path.exists():
        raise MediaError(f"no such file: {source.text}", hint="check the path")
    if path.is_dir():
        raise MediaError(f"{source.text} is a directory, not a file", hint="name a media file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MediaError(f"cannot read {source.text}: {exc.strerror}", hint="check its permissions") from exc
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
        raise MediaError("malformed data: URI (bad base64)", hint="use data:<type>;base64,<data>") from exc
    if not data:
        raise MediaError("data: URI is empty", hint="put the media bytes after the comma")
    return data


def _cache_path(url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()
    name = Path(urllib.parse.urlsplit(url).path).name or "media"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in urllib.parse.unquote(name))[-80:]
    return media_cache_dir() / digest[:2] / digest / safe


class Downloader:
    """Fetches URLs into the cache, sharing one HTTP connection pool between threads."""

    def __init__(self, on_request: Callable[[str], None] | None = None) -> None:
        self._client: httpx.Client | None = None
        self._on_request = on_request

    def _http(self) -> httpx.Client:
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
        if self._client is not None:
            self._client.close()

    def fetch(self, url: str) -> Path:
        """The cached file for ``url``, downloading it first if needed."""
        target = _cache_path(url)
        if target.is_file():
            return target
        from filelock import FileLock

        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / ".lock")):
            if target.is_file():  # another process finished it while we waited
                return target
            self._download(url, target)
        return target

    def _download(self, url: str, target: Path) -> None:
        import httpx

        limit = _max_bytes()
        delay = 0.5
        for attempt in range(1, RETRIES + 1):
            partial = target.with_name(f".{target.name}.{os.getpid()}.part")
            try:
                if self._on_request:
                    self._on_request(url)
                with self._http().stream("GET", url) as response:
                    if response.status_code >= 400:
                        transient = response.status_code >= 500 or response.status_code == 429
                        if transient and attempt < RETRIES:
                            raise _Retry()
                        raise DownloadError(
                            f"download failed: HTTP {response.status_code} for {url}",
                            hint="check the URL" if not transient else "the server failed; try again later",
                        )
                    declared = response.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > limit:
                        raise _too_big(url, limit)
                    size = 0
                    with open(partial, "wb") as out:
                        for chunk in response.iter_bytes(1 << 16):
                            size += len(chunk)
                            if size > limit:
                                raise _too_big(url, limit)
                            out.write(chunk)
                        out.flush()
                        os.fsync(out.fileno())
                    if declared and declared.isdigit() and size != int(declared):
                        raise DownloadError(
                            f"download of {url} was cut short ({size} of {declared} bytes)",
                            hint="try again",
                        )
                os.replace(partial, target)
                return
            except _Retry:
                pass
            except httpx.TooManyRedirects as exc:
                raise DownloadError(f"too many redirects for {url} (more than {MAX_REDIRECTS})",
                                    hint="check the URL") from exc
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if attempt == RETRIES:
                    what = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
                    raise DownloadError(
                        f"download {what} for {url}: {exc or type(exc).__name__}",
                        hint=f"check the network; the timeout is {_timeout():g} s ({TIMEOUT_ENV})",
                    ) from exc
            finally:
                partial.unlink(missing_ok=True)
            time.sleep(delay)
            delay *= 2


class _Retry(Exception):
    pass


def _too_big(url: str, limit: int) -> DownloadError:
    return DownloadError(
        f"download of {url} is larger than the {limit // (1024 * 1024)} MB cap",
        hint=f"raise it with {MAX_BYTES_ENV}=<megabytes>",
    )


def decode_image(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    import io

    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            rgb = image.convert("RGB")
    except Image.DecompressionBombError as exc:
        raise MediaError(f"{label} is too large to decode safely ({exc})",
                         hint="downscale the image first") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise MediaError(f"{label} is not a readable image ({exc})",
                         hint="give a PNG, JPEG, WebP or other Pillow-readable file") from exc
    return rgb, {"width": rgb.width, "height": rgb.height}


def decode_audio(data: bytes, label: str) -> tuple[Any, dict[str, Any]]:
    import io

    import soundfile

    try:
        waveform, sample_rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=False)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise MediaError(f"{label} is not readable audio ({exc})",
                         hint="give a WAV, FLAC or Ogg file") from exc
    if waveform.ndim == 2:  # mixed down to mono, as the seed's loader (librosa) does
        waveform = waveform.mean(axis=1)
    if waveform.size == 0:
        raise MediaError(f"{label} holds no audio samples", hint="give a non-empty recording")
    return (waveform, int(sample_rate)), {
        "duration_s": round(waveform.shape[0] / sample_rate, 3),
        "sample_rate": int(sample_rate),
    }


DECODERS = {"image": decode_image, "audio": decode_audio}


class MediaResolver:
    """Resolves sources concurrently: downloads share a pool, decoding runs in the workers."""

    def __init__(self, modality: Modality, on_request: Callable[[str], None] | None = None) -> None:
        self.modality = modality
        self.downloader = Downloader(on_request)
        self._pool = ThreadPoolExecutor(DOWNLOAD_WORKERS, thread_name_prefix="mmrun-media")

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
            path = self.downloader.fetch(source.location)
            data = path.read_bytes()
        elif source.kind == "data":
            data = _read_data_uri(source)
        else:
            path = Path(source.location).expanduser()
            data = _read_path(source)
        label = source.text if source.kind != "data" else "the data: URI"
        decoded, info = DECODERS[self.modality.name](data, label)
        return MediaItem(
            source=source.text if source.kind != "data" else source.text[:40] + "...",
            path=str(path) if path else None,
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            data=decoded,
            info=info,
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.downloader.close()


def smart_resize_size(width: int, height: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen-VL's resize rule: sides rounded to ``factor``, area within [min, max] pixels."""
    import math

    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return w, h
