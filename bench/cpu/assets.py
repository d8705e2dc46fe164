"""Generated media: photo-like JPEGs under the default assets' mirror names, and PNG sets."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

# 12 sizes between 960x720 and 1440x1080: 200-500 KB each as JPEG quality 88.
_SIZES = [(960 + 40 * i, 720 + 30 * i) for i in range(12)]


def _photo(width: int, height: int, seed: int) -> Any:
    """Smooth colour fields, mid-frequency texture and fine grain: compresses like a photo."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 6.28, 3)
    base = np.stack(
        [
            128 + 100 * np.sin(x / (80 + 10 * i) + phase[i]) * np.cos(y / (120 - 9 * i) - phase[i])
            for i in range(3)
        ],
        -1,
    )
    coarse = rng.normal(0, 1, (height // 4, width // 4, 3)).astype(np.float32)
    texture = Image.fromarray((coarse * 40 + 128).clip(0, 255).astype(np.uint8)).resize(
        (width, height), Image.BICUBIC
    )
    grain = rng.normal(0, 6, (height, width, 3))
    pixels = base + (np.asarray(texture, dtype=np.float32) - 128) * 0.8 + grain
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def write_default_images(folder: Path) -> list[dict[str, Any]]:
    """The 12 default image assets as JPEG files named like vLLM's mirror (duck.jpg, ...)."""
    from mmrun.modalities.image import IMAGE

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for i, asset in enumerate(IMAGE.assets):
        width, height = _SIZES[i]
        buffer = io.BytesIO()
        _photo(width, height, seed=i).save(buffer, format="JPEG", quality=88)
        (folder / asset.mirror_name).write_bytes(buffer.getvalue())
        written.append(
            {
                "name": asset.name,
                "file": asset.mirror_name,
                "width": width,
                "height": height,
                "bytes": len(buffer.getvalue()),
            }
        )
    return written


def write_png_set(folder: Path, prefix: str, count: int, seed: int, size: int = 224) -> list[Path]:
    """``count`` distinct small PNG images (multiples of 28 px: Qwen's resize leaves them be)."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        colour = rng.integers(0, 256, 3)
        noise = rng.integers(-40, 40, (size, size, 3))
        pixels = (colour + noise).clip(0, 255).astype(np.uint8)
        path = folder / f"{prefix}{i:03d}.png"
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return paths
