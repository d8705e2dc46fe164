"""Media held inline in a cell or a JSON field as base64 text (no ``data:`` header), as
benchmark TSVs store their images: recognized by what the text decodes to (the magic bytes
of an image, audio or video format), so that it is not taken for a file path."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence

# Base64 characters whose decoded bytes are enough to tell a format by its magic bytes.
_HEAD_CHARS = 32
_ALPHABET = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# Text this long, all of base64's alphabet, is no path even when its bytes are no format
# mmrun knows (a file name is at most 255 characters).
_SURELY_BASE64 = 256


def sniff(data: bytes) -> str | None:
    """The MIME type of media bytes, told by their magic bytes; None for none mmrun knows."""
    head = data[:24]
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "image/tiff"
    # "BM" alone is two letters; a BMP's DIB header says its size at byte 14.
    if head.startswith(b"BM") and len(head) >= 18 and head[14] in (12, 40, 52, 56, 108, 124):
        return "image/bmp"
    if head.startswith(b"RIFF") and len(head) >= 12:
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}.get(
            head[8:12]
        )
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"ID3") or _mpeg_audio_frame(head):
        return "audio/mpeg"
    if head.startswith(b"FORM") and head[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"M4A ", b"M4B "):
            return "audio/mp4"
        return "video/quicktime" if brand == b"qt  " else "video/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # Matroska / WebM
        return "video/webm"
    return None


def _mpeg_audio_frame(head: bytes) -> bool:
    """An MPEG audio frame header (an MP3 without ID3 tags): the sync bits, a valid layer,
    a valid bitrate index."""
    return (
        len(head) >= 3
        and head[0] == 0xFF
        and head[1] & 0xE0 == 0xE0
        and (head[1] >> 1) & 0b11 != 0
        and head[2] >> 4 not in (0, 0xF)
    )


def looks_like_base64(text: str) -> bool:
    """Whether ``text`` (stripped) is base64 text rather than a path: its start decodes to the
    magic bytes of a media format, or it is far too long for a path and all base64."""
    head = text[:_HEAD_CHARS]
    if len(head) < 8 or not _ALPHABET.fullmatch(head[: len(head) // 4 * 4]):
        return False
    try:
        start = base64.b64decode(head[: len(head) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return False
    if sniff(start) is not None:
        return True
    return len(text) >= _SURELY_BASE64 and _ALPHABET.fullmatch("".join(text.split())) is not None


class InlineError(ValueError):
    """Text that is base64 but no media: the message says why, in a few words."""


def inline_uri(text: str) -> str:
    """Base64 text (``looks_like_base64``) as a ``data:`` URI of its media type; InlineError
    when it does not decode, or decodes to no format mmrun knows."""
    compact = "".join(text.split()) if any(c.isspace() for c in text) else text
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InlineError(f"broken base64 ({_reason(exc)})") from exc
    kind = sniff(data)
    if kind is None:
        raise InlineError(
            f"base64 of {len(data):,} bytes that are no image, audio or video format mmrun knows "
            f"(they start {data[:8].hex(' ')})"
        )
    return f"data:{kind};base64,{compact}"


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "number of data characters" in text or "Incorrect padding" in text:
        return "cut short: its length is not a multiple of 4"
    if "Only base64 data" in text:
        return "a character outside base64's alphabet"
    if "Excess data after padding" in text:
        return "'=' padding before its end"
    return text


def field_sources(
    texts: Sequence[str], label: str, resolve: Callable[[str], str]
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The sources of a field's media: base64 text as a data: URI, named ``label`` (with its
    place where the field holds several), anything else as ``resolve`` makes of the text as given. The names
    the result line lists, where they differ from the sources. Raises InlineError saying
    which entry holds what."""
    sources: list[str] = []
    names: list[str] = []
    for i, raw in enumerate(texts):
        text = raw.strip()
        name = label + (f"[{i}]" if len(texts) > 1 else "")
        if looks_like_base64(text):
            try:
                sources.append(inline_uri(text))
            except InlineError as exc:
                raise InlineError(f"{name} holds {exc}") from None
            names.append(name)
        else:
            sources.append(resolve(raw))
            names.append(sources[-1])
    return tuple(sources), (tuple(names) if names != sources else None)
