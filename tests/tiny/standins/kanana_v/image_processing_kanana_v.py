# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kanana-V's remote image processor, written from what vLLM 0.32's kanana_v.py
reads and calls:

- ``smart_resize(height=, width=, factor=, min_pixels=, max_pixels=)``, a function of this
  module (vLLM looks it up next to the class) giving the (height, width) an image is resized
  to: both multiples of ``factor`` (patch size x merge size), the pixel count within bounds;
- ``min_pixels`` and ``max_pixels``;
- a call on one image whose ``pixel_values`` are its patches, one row per patch of
  channels x temporal_patch_size x patch_size x patch_size values (the frame repeated over
  the temporal patch), in row-major order of the patch grid (the order the C-Abstractor
  reshapes them in), and whose ``image_meta`` holds ``vision_grid_thw`` (1, grid height,
  grid width, in patches) and ``image_token_thw`` (the same grid merged by merge_size: the
  image's token count is its product)."""

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def smart_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = 3136, max_pixels: int = 12544
) -> tuple[int, int]:
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        scale = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / scale / factor) * factor)
        w = max(factor, math.floor(width / scale / factor) * factor)
    elif h * w < min_pixels:
        scale = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * scale / factor) * factor
        w = math.ceil(width * scale / factor) * factor
    return h, w


class KananaVImageProcessor(BaseImageProcessor):
    model_input_names = ("pixel_values",)

    def __init__(
        self,
        min_pixels: int = 3136,
        max_pixels: int = 12544,
        patch_size: int = 14,
        temporal_patch_size: int = 2,
        merge_size: int = 2,
        image_mean=(0.5, 0.5, 0.5),
        image_std=(0.5, 0.5, 0.5),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.patch_size = patch_size
        self.temporal_patch_size = temporal_patch_size
        self.merge_size = merge_size
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _one(self, image) -> tuple[torch.Tensor, dict[str, list[int]]]:
        if not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image).astype(np.uint8))
        image = image.convert("RGB")
        p, m = self.patch_size, self.merge_size
        height, width = smart_resize(
            height=image.height,
            width=image.width,
            factor=p * m,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        image = image.resize((width, height), Image.BICUBIC)
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        pixels = (pixels - np.array(self.image_mean)) / np.array(self.image_std)
        frame = pixels.transpose(2, 0, 1).astype(np.float32)  # (C, H, W)
        gh, gw = height // p, width // p
        channels = frame.shape[0]
        grid = frame.reshape(channels, gh, p, gw, p).transpose(1, 3, 0, 2, 4)  # (gh, gw, C, p, p)
        grid = np.repeat(grid[:, :, :, None], self.temporal_patch_size, axis=3)  # (.., C, T, p, p)
        patches = torch.from_numpy(np.ascontiguousarray(grid.reshape(gh * gw, -1)))
        meta = {"vision_grid_thw": [1, gh, gw], "image_token_thw": [1, gh // m, gw // m]}
        return patches, meta

    def preprocess(self, images=None, return_tensors=None, **kwargs: Any) -> BatchFeature:
        items = images if isinstance(images, (list, tuple)) else [images]
        outputs = [self._one(image) for image in items]
        pixel_values = torch.cat([patches for patches, _ in outputs])
        metas = [meta for _, meta in outputs]
        image_meta = metas[0] if len(metas) == 1 else {k: [m[k] for m in metas] for k in metas[0]}
        return BatchFeature({"pixel_values": pixel_values, "image_meta": image_meta})

    def __call__(self, images=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images=images, **kwargs)
