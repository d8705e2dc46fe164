"""Media given as Python objects (mmrun's Python API: a PIL image, an array of pixels, of
audio samples or of video frames), held here in their decoded form under a source of their
own (``mmrun-object:...``) until the resolver takes them.

The modality turns the object into what its decoder would have returned
(``Modality.from_object``); the prompt's item then carries only that source, so every layer
between the call and the engine deals in sources as it does for files."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mmrun.errors import MediaError

SCHEME = "mmrun-object"


@dataclass(frozen=True)
class Held:
    """An object's decoded item (``data``, ``info``: as ``Modality.decode`` returns them), the
    name its result lists (``label``), and the digest and size of its decoded bytes."""

    label: str
    data: Any
    info: dict[str, Any]
    sha256: str
    size_bytes: int


_held: dict[str, Held] = {}
_lock = threading.Lock()


def hold(data: Any, info: dict[str, Any], label: str, source: str | None = None) -> str:
    """Keep a decoded item (in place of what ``source`` held, where given); the source that
    names it."""
    digest, size = _digest(data)
    source = source or f"{SCHEME}:{uuid.uuid4().hex}"
    with _lock:
        _held[source] = Held(label, data, info, digest, size)
    return source


def take(source: str) -> Held:
    """The item ``source`` names, no longer held (each is resolved once)."""
    with _lock:
        held = _held.pop(source, None)
    if held is None:
        raise MediaError(
            f"{source} names no media object held by this process",
            hint="media given as Python objects come only through mmrun's Python API",
        )
    return held


def release(sources: Iterable[str]) -> None:
    """Forget the items of a call that ended before they were resolved."""
    with _lock:
        for source in sources:
            _held.pop(source, None)


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array numpy can read without copying from elsewhere (a numpy
    array, or anything with ``shape``, ``dtype`` and ``__array__``)."""
    return all(hasattr(value, name) for name in ("shape", "dtype", "__array__"))


def is_pil_image(value: Any) -> bool:
    return all(hasattr(value, name) for name in ("mode", "size", "convert", "getbands"))


def described(array: Any) -> str:
    """An array's shape and element type, as an error line shows them."""
    shape = " x ".join(str(n) for n in array.shape) or "a scalar"
    return f"{shape} of {array.dtype}"


def _digest(data: Any) -> tuple[str, int]:
    """The SHA-256 and size of a decoded item's bytes: pixels, samples or frames."""
    digest = hashlib.sha256()
    size = 0
    for part in data if isinstance(data, tuple) else (data,):
        raw = _raw_bytes(part)
        if raw is not None:
            digest.update(raw)
            size += raw.nbytes if isinstance(raw, memoryview) else len(raw)
    return digest.hexdigest(), size


def _raw_bytes(part: Any) -> bytes | memoryview | None:
    if is_array(part):
        import numpy as np

        return np.ascontiguousarray(part).data  # its bytes, not copied
    if is_pil_image(part):
        return bytes(part.tobytes())
    return None
