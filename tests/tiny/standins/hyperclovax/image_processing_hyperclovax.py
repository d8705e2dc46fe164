# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for HyperCLOVA X SEED Vision's remote image processor, written from what vLLM
0.28's hyperclovax_vision.py reads of its outputs (an "anyres" tiling: a global view, then the
tiles of the best-fitting grid resolution):

- ``pixel_values_images``: per image, a (1 + tiles, 3, grid_size, grid_size) tensor: the whole
  image resized to one tile, then the tiles of the image fitted (aspect kept, centred, padded)
  into the chosen resolution, in row-major order;
- ``image_sizes_images``: per image, [width, height] of the original image (vLLM unpacks it as
  width, height to pick the same resolution and crop the padding off the feature map);
- ``vision_query_lengths_images``: per image, the number of embeddings vLLM's model makes of it
  (the global view's queries, then the unpadded tile feature map with one newline per row),
  which is how many image tokens vLLM puts in place of the image's placeholder.

``possible_resolutions`` are [height, width] pairs in pixels, as in the model's config."""

import math
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


def best_resolution(width: int, height: int, resolutions) -> tuple[int, int]:
    """The (height, width) of ``resolutions`` that keeps the most of the image's pixels once it
    is scaled to fit, then the one that wastes the fewest."""
    chosen = None
    kept_best, waste_best = -1, math.inf
    for res_h, res_w in resolutions:
        scale = min(res_w / width, res_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        waste = res_w * res_h - kept
        if kept > kept_best or (kept == kept_best and waste < waste_best):
            chosen, kept_best, waste_best = (res_h, res_w), kept, waste
    return chosen


def query_length(
    width: int, height: int, resolution: tuple[int, int], grid_size: int, queries: int, unpad: bool
) -> int:
    """How many embeddings the model makes of one image of this size."""
    side = math.isqrt(queries)
    rows = resolution[0] // grid_size * side
    cols = resolution[1] // grid_size * side
    if not unpad:
        return side * side + rows * cols
    # The feature map of the tiles, cropped to the image's aspect ratio (the fitting's padding
    # removed symmetrically), then one newline embedding per row.
    if width / height > cols / rows:
        kept = int(height * (cols / width))
        rows -= 2 * ((rows - kept) // 2)
    else:
        kept = int(width * (rows / height))
        cols -= 2 * ((cols - kept) // 2)
    return side * side + rows * (cols + 1)


class HCXImageProcessor(BaseImageProcessor):
    model_input_names = ("pixel_values_images",)

    def __init__(
        self,
        grid_size: int = 56,
        possible_resolutions=((56, 56),),
        num_queries_vis_abstractor: int = 4,
        unpad: bool = True,
        image_mean=(0.5, 0.5, 0.5),
        image_std=(0.5, 0.5, 0.5),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.grid_size = grid_size
        self.possible_resolutions = [list(r) for r in possible_resolutions]
        self.num_queries_vis_abstractor = num_queries_vis_abstractor
        self.unpad = unpad
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _normalise(self, image: Image.Image) -> np.ndarray:
        pixels = np.asarray(image, dtype=np.float32) / 255.0
        pixels = (pixels - np.array(self.image_mean)) / np.array(self.image_std)
        return pixels.transpose(2, 0, 1).astype(np.float32)  # (C, H, W)

    def _one(self, image) -> tuple[torch.Tensor, list[int], int]:
        if not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image).astype(np.uint8))
        image = image.convert("RGB")
        width, height = image.size
        g = self.grid_size
        res_h, res_w = best_resolution(width, height, self.possible_resolutions)
        scale = min(res_w / width, res_h / height)
        fit_w, fit_h = max(1, int(width * scale)), max(1, int(height * scale))
        canvas = Image.new("RGB", (res_w, res_h), (127, 127, 127))
        canvas.paste(
            image.resize((fit_w, fit_h), Image.BICUBIC),
            ((res_w - fit_w) // 2, (res_h - fit_h) // 2),
        )
        views = [self._normalise(image.resize((g, g), Image.BICUBIC))]
        for top in range(0, res_h, g):
            for left in range(0, res_w, g):
                views.append(self._normalise(canvas.crop((left, top, left + g, top + g))))
        n = query_length(
            width, height, (res_h, res_w), g, self.num_queries_vis_abstractor, self.unpad
        )
        return torch.from_numpy(np.stack(views)), [width, height], n

    def preprocess(self, images=None, return_tensors=None, **kwargs: Any) -> BatchFeature:
        items = images if isinstance(images, (list, tuple)) else [images]
        outputs = [self._one(image) for image in items]
        return BatchFeature(
            {
                "pixel_values_images": [o[0] for o in outputs],
                "image_sizes_images": [o[1] for o in outputs],
                "vision_query_lengths_images": [o[2] for o in outputs],
            }
        )

    def __call__(self, images=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images=images, **kwargs)
