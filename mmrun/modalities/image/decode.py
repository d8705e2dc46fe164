"""Image decoding (Pillow) and its checks: the pixel cap, a header that declares more pixels
than its file can hold (refused before anything is allocated), the decoding memory budget.
What Pillow prints while it decodes is kept out of mmrun's output (see mmrun.capture)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

from mmrun.capture import Captured, library_output
from mmrun.errors import MediaError, UsageError
from mmrun.media.budget import forget_locals, memory_ticket, reserve

MAX_IMAGE_PIXELS = 178_956_970  # Pillow's own decompression-bomb threshold (2x its warning)


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
    with memory_ticket(len(data)):
        failure: Exception | None = None
        with library_output() as said:
            try:
                rgb = _decode_image(data, label)
            except Exception as exc:
                failure = exc
    if failure is not None:
        raise _image_error(failure, label, said) from forget_locals(failure)
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
        reserve(_decode_bytes(image))
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


def image_from_object(value: Any, label: str) -> tuple[Any, dict[str, Any]] | None:
    """An image given as a Python object (``Modality.from_object``): a PIL image, or an array
    of height x width x 3 uint8 (RGB) pixels; a copy in RGB, so that the caller's object may
    change after the call. None for anything else."""
    from mmrun.media.objects import is_array, is_pil_image

    if is_pil_image(value):
        if value.width * value.height > MAX_IMAGE_PIXELS:
            raise _too_many_pixels(label, f"{value.width}x{value.height} pixels")
        rgb = value.convert("RGB") if value.mode != "RGB" else value.copy()
    elif is_array(value):
        rgb = _array_image(value, label)
    else:
        return None
    return rgb, {"width": rgb.width, "height": rgb.height}


def _array_image(value: Any, label: str) -> Any:
    import numpy as np
    from PIL import Image

    from mmrun.media.objects import described

    array = np.asarray(value)
    shape = array.shape
    if array.ndim != 3 or shape[2] != 3 or array.dtype != np.uint8 or 0 in shape:
        raise UsageError(
            f"{label}: an image array is height x width x 3 of uint8 (RGB), not {described(array)}",
            hint="convert it, e.g. PIL.Image.fromarray(array).convert('RGB')"
            if array.dtype == np.uint8
            else "scale it to 0-255 and convert it with array.astype('uint8')",
        )
    if shape[0] * shape[1] > MAX_IMAGE_PIXELS:
        raise _too_many_pixels(label, f"{shape[1]}x{shape[0]} pixels")
    return Image.fromarray(np.ascontiguousarray(array))  # a copy, in mode RGB
