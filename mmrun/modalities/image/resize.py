"""The image modality's setting for a model: how its images are resized before vLLM."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageResize:
    """An image model's ``media_options``: resize each image so both sides are multiples of
    ``factor`` and the area lies within [min_pixels, max_pixels], keeping the aspect ratio
    (Qwen-VL's ``smart_resize`` rule)."""

    max_pixels: int
    min_pixels: int = 56 * 56
    factor: int = 28
