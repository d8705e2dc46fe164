# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kimi-VL's remote image processor (KimiVLImageProcessor), written from what
vLLM 0.32's kimi_vl.py reads: ``patch_size``, ``merge_kernel_size`` and ``in_token_limit``
(vLLM computes each image's token count from them), ``pixel_values`` as one tensor of all
images' patches, (patches, 3, patch_size, patch_size), row by row, and ``image_grid_hws``,
each image's (rows, columns) of patches. An image with more patches than in_token_limit is
scaled down, then padded to whole merge kernels, as vLLM counts it."""

import math

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


class KimiVLImageProcessor(BaseImageProcessor):
    def __init__(
        self,
        patch_size: int = 14,
        merge_kernel_size: tuple[int, int] = (2, 2),
        in_token_limit: int = 4096,
        image_mean: tuple[float, ...] = (0.5, 0.5, 0.5),
        image_std: tuple[float, ...] = (0.5, 0.5, 0.5),
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.merge_kernel_size = list(merge_kernel_size)
        self.in_token_limit = in_token_limit
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)

    def _patches(self, image) -> tuple[np.ndarray, list[int]]:
        patch = self.patch_size
        width, height = image.size
        if (width // patch) * (height // patch) > self.in_token_limit:
            scale = math.sqrt(self.in_token_limit / ((width // patch) * (height // patch)))
            width, height = int(width * scale), int(height * scale)
            image = image.resize((width, height))
        data = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
        data = (data - np.array(self.image_mean, np.float32)) / np.array(self.image_std, np.float32)
        unit_h, unit_w = (k * patch for k in self.merge_kernel_size)
        padded = np.zeros(
            (-(-height // unit_h) * unit_h, -(-width // unit_w) * unit_w, 3), np.float32
        )
        padded[:height, :width] = data
        rows, cols = padded.shape[0] // patch, padded.shape[1] // patch
        patches = (
            padded.reshape(rows, patch, cols, patch, 3)
            .transpose(0, 2, 4, 1, 3)
            .reshape(rows * cols, 3, patch, patch)
        )
        return patches, [rows, cols]

    def preprocess(self, images, return_tensors=None, **kwargs) -> BatchFeature:
        if not isinstance(images, (list, tuple)):
            images = [images]
        done = [self._patches(image) for image in images]
        data = {
            "pixel_values": torch.from_numpy(np.concatenate([p for p, _ in done])),
            "image_grid_hws": torch.tensor([grid for _, grid in done]),
        }
        return BatchFeature(data=data, tensor_type=None)
