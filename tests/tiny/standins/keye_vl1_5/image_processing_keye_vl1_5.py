# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-1.5's remote image processor, written from what vLLM 0.32's
keye_vl1_5.py and keye.py read: ``size`` (``min_pixels``/``max_pixels``) and ``merge_size``,
and the outputs. An image is resized so both sides are multiples of patch_size x merge_size
within the pixel bounds (the rule of vLLM's smart_resize, which counts the placeholders),
scaled to [0, 1], normalised and cut into patch_size x patch_size patches in row-major order:
``pixel_values`` (patches, 3, patch, patch) and ``image_grid_thw`` (one [1, h, w] per image).
A video's frames share the first frame's size; vLLM's Keye-VL-1.5 reads one grid row per
frame, so ``video_grid_thw`` holds [1, h, w] for every frame and ``num_frames`` each video's
frame count, beside ``pixel_values_videos``."""

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def _bounded_size(height: int, width: int, factor: int, min_pixels: int, max_pixels: int):
    """Height and width rounded to multiples of factor, scaled into [min_pixels, max_pixels]."""
    new_h = max(factor, round(height / factor) * factor)
    new_w = max(factor, round(width / factor) * factor)
    if new_h * new_w > max_pixels:
        scale = math.sqrt(height * width / max_pixels)
        new_h = max(factor, math.floor(height / scale / factor) * factor)
        new_w = max(factor, math.floor(width / scale / factor) * factor)
    elif new_h * new_w < min_pixels:
        scale = math.sqrt(min_pixels / (height * width))
        new_h = math.ceil(height * scale / factor) * factor
        new_w = math.ceil(width * scale / factor) * factor
    return new_h, new_w


def _to_pil(item) -> Image.Image:
    if isinstance(item, Image.Image):
        return item.convert("RGB")
    array = np.asarray(item)
    if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
        array = array.transpose(1, 2, 0)  # channels first -> last
    if array.dtype != np.uint8:
        array = np.clip(array * (255 if array.max() <= 1 else 1), 0, 255).astype(np.uint8)
    return Image.fromarray(array).convert("RGB")


class KeyeVL1_5ImageProcessor(BaseImageProcessor):
    model_input_names = ("pixel_values", "image_grid_thw")

    def __init__(
        self,
        min_pixels: int = 28 * 28 * 4,
        max_pixels: int = 28 * 28 * 1280,
        patch_size: int = 14,
        temporal_patch_size: int = 1,
        merge_size: int = 2,
        image_mean=(0.5, 0.5, 0.5),
        image_std=(0.5, 0.5, 0.5),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        self.patch_size = patch_size
        self.temporal_patch_size = temporal_patch_size
        self.merge_size = merge_size
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _target(self, image: Image.Image, size: dict[str, int]) -> tuple[int, int]:
        factor = self.patch_size * self.merge_size
        return _bounded_size(
            image.height, image.width, factor, size["min_pixels"], size["max_pixels"]
        )

    def _normalised(self, image: Image.Image, height: int, width: int) -> np.ndarray:
        resized = image.resize((width, height), Image.BICUBIC)
        pixels = np.asarray(resized, dtype=np.float32) / 255.0
        pixels = (pixels - np.asarray(self.image_mean)) / np.asarray(self.image_std)
        return pixels.transpose(2, 0, 1).astype(np.float32)  # (3, H, W)

    def _patchify(self, frame: np.ndarray) -> tuple[np.ndarray, list[int]]:
        p = self.patch_size
        channels, height, width = frame.shape
        rows, cols = height // p, width // p
        grid = frame.reshape(channels, rows, p, cols, p).transpose(1, 3, 0, 2, 4)
        return grid.reshape(rows * cols, channels, p, p), [1, rows, cols]

    def preprocess(self, images=None, videos=None, size=None, return_tensors="pt", **kwargs):
        bounds = {**self.size, **(size or {})}
        for name in ("min_pixels", "max_pixels"):
            if kwargs.get(name) is not None:
                bounds[name] = kwargs[name]
        data: dict[str, Any] = {}
        if images is not None:
            items = images if isinstance(images, (list, tuple)) else [images]
            patches, grids = [], []
            for item in items:
                image = _to_pil(item)
                cut, grid = self._patchify(self._normalised(image, *self._target(image, bounds)))
                patches.append(cut)
                grids.append(grid)
            data["pixel_values"] = torch.from_numpy(np.concatenate(patches))
            data["image_grid_thw"] = torch.tensor(grids, dtype=torch.long)
        if videos is not None:
            patches, grids, counts = [], [], []
            for video in videos:
                frames = [_to_pil(f) for f in (video[0] if isinstance(video, tuple) else video)]
                height, width = self._target(frames[0], bounds)
                for frame in frames:
                    cut, grid = self._patchify(self._normalised(frame, height, width))
                    patches.append(cut)
                    grids.append(grid)
                counts.append(len(frames))
            data["pixel_values_videos"] = torch.from_numpy(np.concatenate(patches))
            data["video_grid_thw"] = torch.tensor(grids, dtype=torch.long)
            data["num_frames"] = torch.tensor(counts, dtype=torch.long)
        return BatchFeature(data)

    def __call__(self, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images=images, videos=videos, **kwargs)
