"""Media sources: what the user typed (a default asset name, a path, a ``file://`` URL, an
http(s) URL, a data URI) classified, and the bytes of local files and data URIs read, with a size cap."""

from __future__ import annotations

import base64
import binascii
import os
import stat
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmrun.errors import MediaError, shown
from mmrun.media.budget import reserve
from mmrun.media.limits import DEFAULT_MAX_MB, positive_number
from mmrun.media.objects import SCHEME as OBJECT_SCHEME
from mmrun.registry import Modality

BASE_URL_ENV = "MMRUN_ASSETS_BASE_URL"
MAX_FILE_ENV = "MMRUN_MAX_FILE_MB"


@dataclass(frozen=True)
class Source:
    """Where one media item comes from: what the user typed, and how to get it."""

    text: str
    kind: str  # "asset", "path", "url", "data", "object"
    location: str  # the URL for assets and URLs, the path for files, the URI for data
    # (an "object": media given as a Python object, held by mmrun.media.objects)
    fallbacks: tuple[str, ...] = ()  # URLs tried in order when ``location`` fails (assets)
    cache_name: str | None = None  # an asset's mirror name: its cache key, whatever its URL
    make: Callable[[Path], None] | None = None  # an asset mmrun writes itself (Asset.make)

    @property
    def shown(self) -> str:
        """The source as an error line shows it (cut to about 60 characters)."""
        return shown(self.text)


def parse_source(text: str, modality: Modality) -> Source:
    """Classify a source: a default asset name, an http(s) URL, a data URI, or a local path
    (a ``file://`` URL is one)."""
    assets = {asset.name: asset for asset in modality.assets}
    if text in assets:
        asset = assets[text]
        if asset.make is not None:  # made here, never downloaded: no mirror serves it
            return Source(text, "asset", asset.url, (), asset.mirror_name, asset.make)
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
        raise MediaError(f"malformed URL {shown(text)!r}: {exc}", hint="check the URL") from exc
    if scheme in ("http", "https"):
        check_url(text)
        return Source(text, "url", text)
    if scheme == "data":
        return Source(text, "data", text)
    if scheme == OBJECT_SCHEME:
        return Source(text, "object", text)
    if scheme == "file":
        return Source(text, "path", file_url_path(text))
    if len(scheme) > 1 and "://" in text:
        raise MediaError(
            f"unsupported URL scheme {scheme!r} in {shown(text)!r}",
            hint="use a local path (or file:// URL), an http(s) URL or a data: URI",
        )
    return Source(text, "path", text)


def file_url_path(text: str) -> str:
    """A ``file://`` URL's local path (what vLLM's run-batch takes for local media):
    ``file:///data/a.jpg`` -> ``/data/a.jpg``, percent-escapes decoded."""
    parts = urllib.parse.urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise MediaError(
            f"file URL {shown(text)!r} names host {parts.netloc!r}: only local files are read",
            hint="write file:///absolute/path",
        )
    path = urllib.parse.unquote(parts.path)
    if not path:
        raise MediaError(
            f"file URL {shown(text)!r} names no path", hint="write file:///absolute/path"
        )
    return path


def check_url(text: str) -> None:
    """Refuse a URL that cannot be fetched at all (no host, bad characters) before any try:
    that is the user's typo, not a network failure worth retrying."""
    import httpx

    try:
        host = httpx.URL(text).host
    except httpx.InvalidURL as exc:
        raise MediaError(f"malformed URL {shown(text)!r}: {exc}", hint="check the URL") from exc
    if not host:
        raise MediaError(f"malformed URL {shown(text)!r}: it names no host", hint="check the URL")


def checked_path(source: Source) -> Path:
    """A local source's path, checked to be a non-empty regular file, without reading it (for
    a modality that decodes files in place: Modality.decode_file)."""
    path = Path(source.location).expanduser()
    try:
        _check_regular(path, source)
        empty = path.stat().st_size == 0
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise MediaError(f"no such file: {source.shown}", hint="check the path") from exc
    except OSError as exc:
        raise MediaError(
            f"cannot read {source.shown}: {exc.strerror or exc}", hint="check the file"
        ) from exc
    except ValueError as exc:  # e.g. a NUL byte, which no file name can hold
        raise MediaError(
            f"{source.shown!r} is not a valid path ({exc})", hint="name a media file"
        ) from exc
    if empty:
        raise MediaError(f"{source.shown} is empty (0 bytes)", hint="name a non-empty media file")
    return path


def _check_regular(path: Path, source: Source) -> None:
    # stat first: a FIFO would block the read forever and /dev/zero would never end it.
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise MediaError(f"{source.shown} is a directory, not a file", hint="name a media file")
    if not stat.S_ISREG(mode):
        raise MediaError(
            f"{source.shown} is not a regular file (a device, pipe or socket)",
            hint="name a media file",
        )


def read_path(source: Source) -> bytes:
    path = Path(source.location).expanduser()
    try:
        _check_regular(path, source)
        cap_mb = positive_number(MAX_FILE_ENV, DEFAULT_MAX_MB, "megabytes")
        limit = int(cap_mb * 1024 * 1024)
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > limit:
                raise _file_too_big(source.shown, size, cap_mb)
            reserve(size)
            data = file.read(limit + 1)  # a file that grew meanwhile still stops at the cap
        if len(data) > limit:
            raise _file_too_big(source.shown, len(data), cap_mb)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise MediaError(f"no such file: {source.shown}", hint="check the path") from exc
    except PermissionError as exc:
        raise MediaError(
            f"cannot read {source.shown}: permission denied",
            hint="check its permissions and those of its folders",
        ) from exc
    except OSError as exc:
        raise MediaError(
            f"cannot read {source.shown}: {exc.strerror or exc}", hint="check the file"
        ) from exc
    except ValueError as exc:  # e.g. a NUL byte, which no file name can hold
        raise MediaError(
            f"{source.shown!r} is not a valid path ({exc})", hint="name a media file"
        ) from exc
    if not data:
        raise MediaError(f"{source.shown} is empty (0 bytes)", hint="name a non-empty media file")
    return data


def _file_too_big(text: str, size: int, cap_mb: float) -> MediaError:
    return MediaError(
        f"{text} is {size / (1024 * 1024):,.1f} MB: more than the {cap_mb:g} MB "
        "that mmrun reads from a local file",
        hint=f"raise the cap with {MAX_FILE_ENV}=<megabytes>",
    )


def read_data_uri(source: Source) -> bytes:
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
