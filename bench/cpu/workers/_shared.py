"""What the baseline scripts share (kept out of mmrun on purpose: they stand for the seed)."""

from __future__ import annotations

import io
import math
import time
import urllib.request
from typing import Any


def smart_resize(
    width: int,
    height: int,
    factor: int = 28,
    min_pixels: int = 56 * 56,
    max_pixels: int = 1024 * 28 * 28,
) -> tuple[int, int]:
    """qwen_vl_utils' rule, which the seed applies to Qwen2.5-VL images (as mmrun does)."""
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


def decode(data: bytes, resize: dict[str, int] | None) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    if resize:
        size = smart_resize(image.width, image.height, **resize)
        if size != image.size:
            image = image.resize(size)
    return image


def fetch(url: str, resize: dict[str, int] | None) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return decode(response.read(), resize)


def summary(outputs: list[Any], start: float, marks: dict[str, float]) -> dict[str, Any]:
    """One JSON-able result: vLLM's own counts, and the phases since the script started."""
    return {
        "outputs": [
            {
                "text": o.outputs[0].text,
                "prompt_tokens": len(o.prompt_token_ids or []),
                "completion_tokens": len(o.outputs[0].token_ids),
            }
            for o in outputs
        ],
        "phases_s": {k: round(v - start, 4) for k, v in marks.items()},
        "result_at": time.monotonic(),
    }
