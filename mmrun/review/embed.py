"""Media on a review page: each distinct source once, embedded as a data URI (an image's
thumbnail, an audio clip's first seconds, a video's keyframes), or linked by a path relative
to the page (``--link-media``, or media beyond the embedding budget). A URL's media come from
the copy in mmrun's media cache, never fetched.
"""

from __future__ import annotations

import base64
import io
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

THUMBNAIL_PX = 320  # the longer side of an embedded image
AUDIO_SECONDS = 15.0  # an embedded clip is cut to this long (mono Ogg Vorbis)
VIDEO_FRAMES = 4
EMBED_BUDGET_MB = 256.0  # media beyond this are linked, not embedded

_IMAGE = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"}
_AUDIO = {".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".au", ".caf"}
_VIDEO = {".mp4", ".avi", ".mov", ".mkv", ".webm"}


@dataclass(frozen=True)
class MediaOptions:
    link: bool = False
    root: Path | None = None
    budget_mb: float = EMBED_BUDGET_MB


def _kind(name: str, modality: str | None) -> str:
    suffix = Path(urllib.parse.urlparse(name).path if "://" in name else name).suffix.lower()
    if suffix in _IMAGE:
        return "image"
    if suffix in _AUDIO:
        return "audio"
    if suffix in _VIDEO:
        return "video"
    if name.startswith("data:"):
        return name[5:].split("/", 1)[0] or "image"
    return modality if modality in ("image", "audio", "video") else "image"


def _resolve(source: str, roots: Sequence[Path]) -> Path | None:
    path = Path(source).expanduser()
    candidates = [path] if path.is_absolute() else [root / path for root in roots]
    return next((c for c in candidates if c.is_file()), None)


def _cached(url: str) -> Path | None:
    """The file mmrun's downloader keeps for ``url`` in its media cache, if it is there."""
    from mmrun.media.download import cache_path

    path = cache_path(url)
    return path if path.is_file() else None


def _data_bytes(source: str) -> bytes | None:
    header, _, payload = source.partition(",")
    try:
        if header.endswith(";base64"):
            return base64.b64decode(payload)
        return urllib.parse.unquote_to_bytes(payload)
    except ValueError:
        return None


def _uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def thumbnail(data: bytes) -> str:
    """A JPEG data URI of the image, its longer side at most THUMBNAIL_PX."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (THUMBNAIL_PX, THUMBNAIL_PX))  # JPEG: decode at a reduced size
        small = ImageOps.exif_transpose(image).convert("RGB")
        small.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
        out = io.BytesIO()
        small.save(out, "JPEG", quality=75)
    return _uri("image/jpeg", out.getvalue())


def audio_clip(data: bytes) -> str:
    """An Ogg Vorbis data URI of the clip's first AUDIO_SECONDS, mixed down to mono."""
    import soundfile

    with soundfile.SoundFile(io.BytesIO(data)) as clip:
        samples = clip.read(frames=int(AUDIO_SECONDS * clip.samplerate), dtype="float32")
        rate = clip.samplerate
    if samples.ndim > 1:
        samples = samples.mean(axis=1)
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="OGG", subtype="VORBIS")
    return _uri("audio/ogg", out.getvalue())


def keyframes(path: Path) -> list[str]:
    """VIDEO_FRAMES frames spread over the clip, as JPEG thumbnails (OpenCV)."""
    import cv2

    from mmrun.capture import library_output

    frames = []
    with library_output():
        capture = cv2.VideoCapture(str(path))
        try:
            count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            for i in range(VIDEO_FRAMES):
                capture.set(cv2.CAP_PROP_POS_FRAMES, (2 * i + 1) * count // (2 * VIDEO_FRAMES))
                ok, frame = capture.read()
                if ok:
                    ok, jpeg = cv2.imencode(".jpg", frame)
                    if ok:
                        frames.append(thumbnail(jpeg.tobytes()))
        finally:
            capture.release()
    return frames


class MediaTable:
    """Each distinct media source once: embedded, linked, or noted as unavailable."""

    def __init__(
        self, options: MediaOptions, roots: Sequence[Path], page_dir: Path, modality: str | None
    ) -> None:
        self.options = options
        self.roots = roots
        self.page_dir = page_dir
        self.modality = modality
        self.entries: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.embedded_bytes = 0
        self.linked_over_budget = 0

    def key(self, source: str) -> str:
        found = self.keys.get(source)
        if found is None:
            found = self.keys[source] = f"m{len(self.keys)}"
            self.entries[found] = self._entry(source)
        return found

    def _entry(self, source: str) -> dict[str, Any]:
        kind = _kind(source, self.modality)
        name = source if not source.startswith("data:") else f"inline {kind}"
        entry: dict[str, Any] = {"kind": kind, "name": name[:200]}
        over = self.embedded_bytes > self.options.budget_mb * 2**20
        if source.startswith(("http://", "https://")):
            # What mmrun downloaded is in its cache: embedded from there, never fetched here.
            path = _cached(source)
            if path is None:
                return {**entry, "kind": "link", "src": source, "note": "not in mmrun's cache"}
            if self.options.link or over:
                self.linked_over_budget += over
                return {**entry, "kind": "link", "src": source, "note": "remote, not embedded"}
            entry["note"] = "from mmrun's cache"
        else:
            path = None if source.startswith("data:") else _resolve(source, self.roots)
        if path is None and not source.startswith("data:"):
            return {**entry, "kind": "link", "src": None, "note": "file not found"}
        if path is not None and (self.options.link or over):
            self.linked_over_budget += over
            relative = os.path.relpath(path.resolve(), self.page_dir.resolve())
            return {**entry, "src": urllib.parse.quote(Path(relative).as_posix()), "linked": True}
        try:
            data = path.read_bytes() if path is not None else _data_bytes(source)
            if data is None:
                raise ValueError("bad data URI")
            if kind == "image":
                entry["src"] = thumbnail(data)
            elif kind == "audio":
                entry["src"] = audio_clip(data)
            elif kind == "video" and path is not None:
                entry["frames"] = keyframes(path)
            else:
                raise ValueError(f"cannot embed {kind}")
        except Exception as exc:  # an unreadable file is noted on its card, the page goes on
            src = source if source.startswith(("http://", "https://")) else None
            return {**entry, "kind": "link", "src": src, "note": f"not embedded: {exc}"[:200]}
        self.embedded_bytes += len(entry.get("src", "")) + sum(map(len, entry.get("frames", [])))
        return entry
