# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo's remote image processor (MolmoImageProcessor), written from what vLLM
0.32's molmo.py reads: the settings ``max_crops``, ``overlap_margins``,
``base_image_input_size``, ``image_patch_size`` and ``image_token_length_w``/``_h``, from which
vLLM counts the crops (the tiling it selects, plus one) and the placeholder tokens of each
image. :meth:`preprocess` makes crops that agree with those counts: the whole image resized
to one base-size crop, then the image resized to the tiling's crop windows plus the margins
and cut into overlapping base-size crops (a step of one window); each crop is normalized and
cut into patch x patch patches in row-major order. It also says, per crop and per 2x2-pooled
patch, which pooled patches are kept (those outside the margins that a neighbouring crop
covers), and where each lands on the pooled grid (:meth:`kept_pooled_patches`)."""

from typing import Any

import numpy as np
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor

POOLING = 2


def _tiling(height: int, width: int, window: int, max_crops: int) -> tuple[int, int]:
    """The (rows, cols) tiling of ``window``-pixel windows that needs the least upscaling to
    cover the image, or, when every tiling would shrink it, the one that shrinks it least."""
    tilings = sorted(
        (
            (i, j)
            for i in range(1, max_crops + 1)
            for j in range(1, max_crops + 1)
            if i * j <= max_crops
        ),
        key=lambda t: t[0] * t[1],
    )
    scales = [min(r * window / height, c * window / width) for r, c in tilings]
    if all(s < 1 for s in scales):
        return tilings[int(np.argmax(scales))]
    return tilings[int(np.argmin([s if s >= 1 else 1e10 for s in scales]))]


class MolmoImageProcessor(BaseImageProcessor):
    model_input_names = ("images", "image_input_idx", "image_masks")

    def __init__(
        self,
        max_crops: int = 12,
        overlap_margins: tuple[int, int] = (4, 4),
        base_image_input_size: tuple[int, int] = (336, 336),
        image_token_length_w: int = 12,
        image_token_length_h: int = 12,
        image_patch_size: int = 14,
        image_padding_mask: bool = True,
        do_normalize: bool = True,
        image_mean: tuple[float, float, float] = (0.48145466, 0.4578275, 0.40821073),
        image_std: tuple[float, float, float] = (0.26862954, 0.26130258, 0.27577711),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_crops = max_crops
        self.overlap_margins = list(overlap_margins)
        self.base_image_input_size = list(base_image_input_size)
        self.image_token_length_w = image_token_length_w
        self.image_token_length_h = image_token_length_h
        self.image_patch_size = image_patch_size
        self.image_padding_mask = image_padding_mask
        self.do_normalize = do_normalize
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    # Geometry ---------------------------------------------------------------------------------

    def _window(self) -> tuple[int, int, int]:
        """(crop size, crop window size, margin pixels) in pixels."""
        patch = self.image_patch_size
        left, right = self.overlap_margins
        crop = self.base_image_input_size[0]
        return crop, crop - (left + right) * patch, (left + right) * patch

    def tiling(self, height: int, width: int) -> tuple[int, int]:
        _, window, margins = self._window()
        return _tiling(height - margins, width - margins, window, self.max_crops)

    def _kept(self, index: int, count: int) -> range:
        """The pooled rows (or columns) that crop ``index`` of ``count`` keeps."""
        pooled = self.base_image_input_size[0] // self.image_patch_size // POOLING
        if count == 1:
            return range(pooled)
        left, right = (m // POOLING for m in self.overlap_margins)
        start = 0 if index == 0 else left
        stop = pooled if index == count - 1 else pooled - right
        return range(start, stop)

    def kept_pooled_patches(self, height: int, width: int) -> tuple[int, int, list[np.ndarray]]:
        """(grid rows, grid cols, per tile crop an array of pooled-grid indices, -1 where a
        pooled patch is dropped) for the tile crops of an image of this size."""
        rows, cols = self.tiling(height, width)
        row_ranges = [self._kept(i, rows) for i in range(rows)]
        col_ranges = [self._kept(j, cols) for j in range(cols)]
        grid_rows = sum(len(r) for r in row_ranges)
        grid_cols = sum(len(c) for c in col_ranges)
        pooled = self.base_image_input_size[0] // self.image_patch_size // POOLING
        crops = []
        row_offset = 0
        for i in range(rows):
            col_offset = 0
            for j in range(cols):
                index = np.full((pooled, pooled), -1, dtype=np.int64)
                for a, r in enumerate(row_ranges[i]):
                    for b, c in enumerate(col_ranges[j]):
                        index[r, c] = (row_offset + a) * grid_cols + col_offset + b
                crops.append(index.reshape(-1))
                col_offset += len(col_ranges[j])
            row_offset += len(row_ranges[i])
        return grid_rows, grid_cols, crops

    # Pixels -----------------------------------------------------------------------------------

    def _patches(self, crop: Image.Image) -> np.ndarray:
        pixels = np.asarray(crop, dtype=np.float32) / 255.0
        if self.do_normalize:
            pixels = (pixels - np.array(self.image_mean, np.float32)) / np.array(
                self.image_std, np.float32
            )
        p = self.image_patch_size
        n = pixels.shape[0] // p
        return pixels.reshape(n, p, n, p, 3).transpose(0, 2, 1, 3, 4).reshape(n * n, p * p * 3)

    def preprocess(self, image: Any) -> np.ndarray:
        """The crops of one image: (1 + tiling rows x cols, patches per crop, pixels per
        patch), the whole image first."""
        if not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image).astype(np.uint8))
        image = image.convert("RGB")
        crop, window, margins = self._window()
        rows, cols = self.tiling(image.height, image.width)
        crops = [image.resize((crop, crop), Image.BILINEAR)]
        tiled = image.resize((cols * window + margins, rows * window + margins), Image.BILINEAR)
        for i in range(rows):
            for j in range(cols):
                box = (j * window, i * window, j * window + crop, i * window + crop)
                crops.append(tiled.crop(box))
        return np.stack([self._patches(c) for c in crops])
