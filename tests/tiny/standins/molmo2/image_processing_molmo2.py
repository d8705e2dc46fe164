# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo2's remote image processor (Molmo2ImageProcessor), written from what vLLM
0.32's molmo2.py reads: the settings ``size`` (a crop's height and width), ``patch_size``,
``pooling_size`` (rows, cols of patches pooled into one token), ``max_crops`` and
``overlap_margins`` (patches each tile crop shares with its neighbours, left and right), from
which vLLM picks the tiling of each image and counts its tokens.

:meth:`preprocess` returns what vLLM takes from the processor for each image:

- ``pixel_values``: the crops, (crops, patches per crop, patch * patch * 3), normalized: first
  the whole image resized to one crop (the low-resolution view), then the image resized to
  the tiling's windows plus the margins and cut into crops one window apart, row-major;
- ``image_token_pooling``: per pooled token, the indices (into this image's crops x patches)
  of the patches it pools, -1 where the pooling window runs past the patch grid: first the
  low-resolution view's tokens, then the tokens of the high-resolution patch grid, where
  each patch is taken from the one crop that keeps it (a tile crop drops the margins that a
  neighbouring crop covers);
- ``image_grids``: (low-resolution rows, cols, high-resolution rows, cols) of pooled tokens;
- ``image_num_crops``: 1 + the tiling's crops."""

from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def _tiling(height: int, width: int, window: int, max_crops: int) -> tuple[int, int]:
    """(rows, cols) of ``window``-pixel windows: the tiling that covers the image with the
    least upscaling, or, when every tiling would shrink it, the one that shrinks it least."""
    tilings = sorted(
        (
            (i, j)
            for i in range(1, max_crops + 1)
            for j in range(1, max_crops + 1)
            if i * j <= max_crops
        ),
        key=lambda t: (t[0] * t[1], t[0]),
    )
    scales = np.array([min(r * window / height, c * window / width) for r, c in tilings])
    if (scales < 1).all():
        return tilings[int(scales.argmax())]
    return tilings[int(np.where(scales < 1, 1e10, scales).argmin())]


def pool_indices(rows: int, cols: int, pool_h: int, pool_w: int, index: np.ndarray) -> np.ndarray:
    """For a rows x cols grid of patch indices (``index``), the pool_h x pool_w windows over it,
    row-major, padded with -1 past its edges: (pooled tokens, pool_h * pool_w)."""
    out_rows = -(-rows // pool_h)
    out_cols = -(-cols // pool_w)
    padded = np.full((out_rows * pool_h, out_cols * pool_w), -1, dtype=np.int64)
    padded[:rows, :cols] = index
    windows = padded.reshape(out_rows, pool_h, out_cols, pool_w).transpose(0, 2, 1, 3)
    return windows.reshape(out_rows * out_cols, pool_h * pool_w)


def to_patches(image: Image.Image, patch: int, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """A crop's normalized pixels cut into patch x patch patches, row-major."""
    pixels = (np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0 - mean) / std
    rows, cols = pixels.shape[0] // patch, pixels.shape[1] // patch
    pixels = pixels[: rows * patch, : cols * patch]
    out = pixels.reshape(rows, patch, cols, patch, 3).transpose(0, 2, 1, 3, 4)
    return out.reshape(rows * cols, patch * patch * 3)


class Molmo2ImageProcessor(BaseImageProcessor):
    model_input_names = ("pixel_values", "image_token_pooling", "image_grids", "image_num_crops")

    def __init__(
        self,
        size: dict[str, int] | None = None,
        patch_size: int = 14,
        pooling_size: tuple[int, int] = (2, 2),
        max_crops: int = 8,
        overlap_margins: tuple[int, int] = (4, 4),
        image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5),
        image_std: tuple[float, float, float] = (0.5, 0.5, 0.5),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.size = dict(size or {"height": 378, "width": 378})
        self.patch_size = patch_size
        self.pooling_size = list(pooling_size)
        self.max_crops = max_crops
        self.overlap_margins = list(overlap_margins)
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _one(self, image: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        if not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image).astype(np.uint8))
        image = image.convert("RGB")
        patch = self.patch_size
        crop = self.size["height"]
        grid = crop // patch  # patches per crop side
        left, right = self.overlap_margins
        window = (grid - left - right) * patch
        margins = (left + right) * patch
        rows, cols = _tiling(image.height - margins, image.width - margins, window, self.max_crops)
        mean = np.array(self.image_mean, np.float32)
        std = np.array(self.image_std, np.float32)
        pool_h, pool_w = self.pooling_size

        # The low-resolution view: crop 0.
        crops = [to_patches(image.resize((crop, crop), Image.BILINEAR), patch, mean, std)]
        low = pool_indices(grid, grid, pool_h, pool_w, np.arange(grid * grid).reshape(grid, grid))

        # The tile crops: crops 1.. in row-major order, one window apart.
        tiled = image.resize((cols * window + margins, rows * window + margins), Image.BILINEAR)
        for i in range(rows):
            for j in range(cols):
                box = (j * window, i * window, j * window + crop, i * window + crop)
                crops.append(to_patches(tiled.crop(box), patch, mean, std))

        # The high-resolution patch grid, each patch from the crop that keeps it.
        step = window // patch
        high_rows, high_cols = rows * step + left + right, cols * step + left + right

        def owner(k: np.ndarray, count: int) -> np.ndarray:
            return np.clip((k - left) // step, 0, count - 1)

        r = np.arange(high_rows)[:, None]
        c = np.arange(high_cols)[None, :]
        ti, tj = owner(r, rows), owner(c, cols)
        index = (1 + ti * cols + tj) * grid * grid + (r - ti * step) * grid + (c - tj * step)
        high = pool_indices(high_rows, high_cols, pool_h, pool_w, index)
        grids = [
            -(-grid // pool_h),
            -(-grid // pool_w),
            -(-high_rows // pool_h),
            -(-high_cols // pool_w),
        ]
        return np.stack(crops), np.concatenate([low, high]), grids

    def preprocess(self, images: Any, return_tensors: Any = None, **kwargs: Any) -> BatchFeature:
        if not isinstance(images, (list, tuple)):
            images = [images]
        pixels, pooling, grids, counts = [], [], [], []
        for image in images:
            crops, pooled, grid = self._one(image)
            pixels.append(crops)
            pooling.append(pooled)
            grids.append(grid)
            counts.append(len(crops))
        return BatchFeature(
            {
                "pixel_values": torch.from_numpy(np.concatenate(pixels)),
                "image_token_pooling": torch.from_numpy(np.concatenate(pooling)),
                "image_grids": torch.tensor(grids, dtype=torch.long),
                "image_num_crops": torch.tensor(counts, dtype=torch.long),
            }
        )
