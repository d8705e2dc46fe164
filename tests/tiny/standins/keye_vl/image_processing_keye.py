# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-8B-Preview's remote image processor, written from what vLLM 0.32's
keye.py reads: ``size`` (``min_pixels``/``max_pixels``), ``patch_size`` and ``merge_size``,
and the outputs ``pixel_values``/``image_grid_thw`` (``pixel_values_videos``/
``video_grid_thw`` for videos): each image resized so both sides are multiples of
patch_size x merge_size within the pixel bounds (vLLM's smart_resize), scaled to [0, 1],
normalized, and cut into patch_size x patch_size patches in row-major order, one grid row
per image (t = 1; a video has one t per frame)."""

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def _fit(height: int, width: int, factor: int, min_pixels: int, max_pixels: int):
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


class SiglipImageProcessor(BaseImageProcessor):
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
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.patch_size = patch_size
        self.temporal_patch_size = temporal_patch_size
        self.merge_size = merge_size
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _frame(self, image, height=None, width=None) -> np.ndarray:
        if not isinstance(image, Image.Image):
            array = np.asarray(image)
            if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
                array = array.transpose(1, 2, 0)
            if array.dtype != np.uint8:
                array = np.clip(array * (255 if array.max() <= 1 else 1), 0, 255)
            image = Image.fromarray(array.astype(np.uint8))
        image = image.convert("RGB")
        if height is None:
            height, width = _fit(
                image.height,
                image.width,
                self.patch_size * self.merge_size,
                self.size["min_pixels"],
                self.size["max_pixels"],
            )
        image = image.resize((width, height), Image.BICUBIC)
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        pixels = (pixels - np.array(self.image_mean)) / np.array(self.image_std)
        return pixels.transpose(2, 0, 1).astype(np.float32)  # (C, H, W)

    def _patches(self, frames: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
        p = self.patch_size
        channels, height, width = frames[0].shape
        gh, gw = height // p, width // p
        stack = np.stack(frames)  # (T, C, H, W)
        stack = stack.reshape(len(frames), channels, gh, p, gw, p)
        stack = stack.transpose(0, 2, 4, 1, 3, 5)  # (T, gh, gw, C, p, p)
        return stack.reshape(-1, channels, p, p), [len(frames), gh, gw]

    def preprocess(self, images=None, videos=None, return_tensors="pt", **kwargs: Any):
        data: dict[str, Any] = {}
        if images is not None:
            items = images if isinstance(images, (list, tuple)) else [images]
            pixels, grids = [], []
            for image in items:
                patches, grid = self._patches([self._frame(image)])
                pixels.append(patches)
                grids.append(grid)
            data["pixel_values"] = torch.from_numpy(np.concatenate(pixels))
            data["image_grid_thw"] = torch.tensor(grids, dtype=torch.long)
        if videos is not None:
            pixels, grids = [], []
            for video in videos:
                if isinstance(video, tuple):  # (frames, metadata)
                    video = video[0]
                frames = list(video)
                first = self._frame(frames[0])
                _, height, width = first.shape
                stacked = [first] + [self._frame(f, height, width) for f in frames[1:]]
                patches, grid = self._patches(stacked)
                pixels.append(patches)
                grids.append(grid)
            data["pixel_values_videos"] = torch.from_numpy(np.concatenate(pixels))
            data["video_grid_thw"] = torch.tensor(grids, dtype=torch.long)
        return BatchFeature(data)

    def __call__(self, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images=images, videos=videos, **kwargs)
