# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-3.5-vision's remote image processor, written from what vLLM 0.32's
phi3v.py reads: ``pixel_values`` of shape (images, num_crops + 1, 3, 336, 336) (a global
336-pixel view first, then the image cut into a grid of 336-pixel crops, zero crops padding
the rest), ``image_sizes`` (height, width of the resized grid, multiples of 336) and
``calc_num_image_tokens_from_image_size``, the token count that vLLM's HD transform produces
for that grid (12 x 12 merged patches per crop, a separator after each row, one between the
crops and the global view). How a grid is chosen for an image is this stand-in's own rule."""

import math

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor

_CROP = 336
_SIDE = _CROP // 14 // 2  # merged patches per crop side: 12
_MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
_STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


class Phi3VImageProcessor(BaseImageProcessor):
    def __init__(self, num_crops: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.num_crops = num_crops

    def grid(self, width: int, height: int, num_crops: int | None = None) -> tuple[int, int]:
        """(rows, columns) of 336-pixel crops: the image's aspect ratio within num_crops."""
        limit = max(1, num_crops or self.num_crops)
        cols = max(1, min(limit, round(math.sqrt(limit * width / height))))
        rows = max(1, min(limit // cols, round(cols * height / width)))
        return rows, cols

    def calc_num_image_tokens_from_image_size(self, width, height, num_crops=None) -> int:
        rows, cols = self.grid(width, height, num_crops)
        return rows * _SIDE * (cols * _SIDE + 1) + 1 + _SIDE * (_SIDE + 1)

    @staticmethod
    def _array(image) -> np.ndarray:
        data = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
        return ((data - _MEAN) / _STD).transpose(2, 0, 1)

    def preprocess(self, images, num_crops=None, return_tensors=None, **kwargs) -> BatchFeature:
        if not isinstance(images, (list, tuple)):
            images = [images]
        limit = max(1, num_crops or self.num_crops)
        pixels, sizes, counts = [], [], []
        for image in images:
            width, height = image.size
            rows, cols = self.grid(width, height, limit)
            big = self._array(image.resize((cols * _CROP, rows * _CROP)))
            crops = [self._array(image.resize((_CROP, _CROP)))]
            for r in range(rows):
                for c in range(cols):
                    crops.append(big[:, r * _CROP : (r + 1) * _CROP, c * _CROP : (c + 1) * _CROP])
            crops += [np.zeros_like(crops[0])] * (limit + 1 - len(crops))
            pixels.append(np.stack(crops))
            sizes.append([rows * _CROP, cols * _CROP])
            counts.append(self.calc_num_image_tokens_from_image_size(width, height, limit))
        data = {
            "pixel_values": torch.from_numpy(np.stack(pixels)),
            "image_sizes": torch.tensor(sizes),
            "num_img_tokens": counts,
        }
        return BatchFeature(data=data, tensor_type=None)
