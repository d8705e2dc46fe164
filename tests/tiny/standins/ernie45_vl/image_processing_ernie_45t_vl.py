# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for ERNIE-4.5-VL's remote image processor, written from what vLLM 0.32's
ernie45_vl.py reads: ``size`` (``min_pixels``/``max_pixels``), ``image_mean``, ``image_std``
and ``rescale_factor`` (vLLM normalizes the pixels itself), and the outputs ``images`` (raw
0-255 values, one row of channels x patch x patch per patch) and ``grid_thw``. Each image is
resized so both sides are multiples of patch_size x merge_size within the pixel bounds (vLLM's
smart_resize) and cut into patches, each merge_size x merge_size block of patches in a row;
an image has t = 1, a video t = its frame count (padded to even, the temporal merge)."""

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


def _rgb(frame) -> Image.Image:
    if isinstance(frame, Image.Image):
        return frame.convert("RGB")
    array = np.asarray(frame)
    if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
        array = array.transpose(1, 2, 0)
    return Image.fromarray(array.astype(np.uint8)).convert("RGB")


class Ernie4_5_VLImageProcessor(BaseImageProcessor):
    model_input_names = ("images", "grid_thw")

    def __init__(
        self,
        min_pixels: int = 56 * 56,
        max_pixels: int = 28 * 28 * 6177,
        patch_size: int = 14,
        merge_size: int = 2,
        image_mean=(0.48145466, 0.4578275, 0.40821073),
        image_std=(0.26862954, 0.26130258, 0.27577711),
        rescale_factor: float = 1 / 255,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.size = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.patch_size = patch_size
        self.merge_size = merge_size
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)
        self.rescale_factor = rescale_factor

    def _patches(self, frames: list) -> tuple[np.ndarray, list[int]]:
        first = _rgb(frames[0])
        height, width = _fit(
            first.height,
            first.width,
            self.patch_size * self.merge_size,
            self.size["min_pixels"],
            self.size["max_pixels"],
        )
        stack = np.stack(
            [np.asarray(_rgb(f).resize((width, height), Image.BICUBIC)) for f in frames]
        ).astype(np.float32)  # (T, H, W, C)
        p, m = self.patch_size, self.merge_size
        t, gh, gw = len(frames), height // p, width // p
        stack = stack.reshape(t, gh // m, m, p, gw // m, m, p, 3)
        stack = stack.transpose(0, 1, 4, 2, 5, 7, 3, 6)  # (T, gh/m, gw/m, m, m, C, p, p)
        return stack.reshape(t * gh * gw, 3 * p * p), [t, gh, gw]

    def preprocess(self, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        pixels, grids = [], []
        for image in images or []:
            patches, grid = self._patches([image])
            pixels.append(patches)
            grids.append(grid)
        for video in videos or []:
            frames = list(video[0] if isinstance(video, tuple) else video)
            if len(frames) % 2:
                frames.append(frames[-1])
            patches, grid = self._patches(frames)
            pixels.append(patches)
            grids.append(grid)
        if not pixels:
            return BatchFeature({})
        return BatchFeature(
            {
                "images": torch.from_numpy(np.concatenate(pixels)),
                "grid_thw": torch.tensor(grids, dtype=torch.long),
            }
        )

    def __call__(self, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images=images, videos=videos, **kwargs)
