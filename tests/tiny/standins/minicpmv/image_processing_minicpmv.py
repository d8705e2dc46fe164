# Remote code for a checkpoint, run by whatever transformers loads it.
# ruff: noqa: RUF012
# mypy: ignore-errors
"""STAND-IN for MiniCPM-V 2.6's remote image processor (``MiniCPMVImageProcessor``), written
from what vLLM 0.32's minicpmv.py and its MiniCPMVProcessor read and call:

- ``get_sliced_grid(image_size, max_slice_nums)``: the (columns, rows) of slices an image is
  cut into besides its overview, or None (vLLM counts ``(columns * rows + 1) *
  image_feature_size`` tokens per image);
- ``get_slice_image_placeholder(image_size, image_idx, max_slice_nums, use_image_id)``: the
  text that stands for an image: its id, the overview and the slices, each a run of
  ``image_feature_size`` ``<unk>`` tokens, which vLLM replaces with the resampler's outputs;
- ``max_slice_nums``, ``image_feature_size`` and ``im_id_start`` / ``im_id_end``;
- calling it on a list (one per prompt) of lists of images returns ``pixel_values`` (per
  prompt, one (3, patch, patches * patch) tensor per overview or slice: the patches side by
  side, as vLLM's vision tower unfolds them), ``image_sizes`` (per prompt, (width, height) of
  each image) and ``tgt_sizes`` (per prompt, the (rows, columns) of patches of each overview or
  slice).

How a grid is chosen and how images are resized is this stand-in's own rule: about
``scale_resolution`` squared pixels per overview and per slice, sides in whole patches."""

import math

import numpy as np
import torch
from PIL import Image
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


class MiniCPMVImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(
        self,
        max_slice_nums: int = 9,
        scale_resolution: int = 448,
        patch_size: int = 14,
        image_feature_size: int = 64,
        use_image_id: bool = True,
        slice_mode: bool = True,
        im_start: str = "<image>",
        im_end: str = "</image>",
        slice_start: str = "<slice>",
        slice_end: str = "</slice>",
        unk: str = "<unk>",
        im_id_start: str = "<image_id>",
        im_id_end: str = "</image_id>",
        norm_mean: list[float] | None = None,
        norm_std: list[float] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.max_slice_nums = max_slice_nums
        self.scale_resolution = scale_resolution
        self.patch_size = patch_size
        self.image_feature_size = image_feature_size
        self.use_image_id = use_image_id
        self.slice_mode = slice_mode
        self.im_start = im_start
        self.im_end = im_end
        self.slice_start = slice_start
        self.slice_end = slice_end
        self.unk = unk
        self.im_id_start = im_id_start
        self.im_id_end = im_id_end
        self.norm_mean = list(norm_mean or [0.5, 0.5, 0.5])
        self.norm_std = list(norm_std or [0.5, 0.5, 0.5])

    # -- the grid and the placeholder text --------------------------------------------------

    @staticmethod
    def _size(image_size) -> tuple[int, int]:
        width, height = (int(v) for v in image_size)
        return max(width, 1), max(height, 1)

    def get_sliced_grid(self, image_size, max_slice_nums=None, nerver_split=False):
        if not self.slice_mode or nerver_split:
            return None
        width, height = self._size(image_size)
        limit = self.max_slice_nums if max_slice_nums is None else max_slice_nums
        area = self.scale_resolution * self.scale_resolution
        count = min(math.ceil(width * height / area), limit)
        if count <= 1:
            return None
        grids = [
            (cols, n // cols)
            for n in (count - 1, count, count + 1)
            if 1 < n <= limit
            for cols in range(1, n + 1)
            if n % cols == 0
        ]
        ratio = math.log(width / height)
        return min(grids, key=lambda g: abs(ratio - math.log(g[0] / g[1])))

    def get_slice_image_placeholder(
        self, image_size, image_idx=0, max_slice_nums=None, use_image_id=None
    ) -> str:
        features = self.unk * self.image_feature_size
        text = f"{self.im_start}{features}{self.im_end}"
        if self.use_image_id if use_image_id is None else use_image_id:
            text = f"{self.im_id_start}{image_idx}{self.im_id_end}{text}"
        grid = self.get_sliced_grid(image_size, max_slice_nums)
        if grid is not None:
            cols, rows = grid
            row = f"{self.slice_start}{features}{self.slice_end}" * cols
            text += "\n".join([row] * rows)
        return text

    # -- pixels -----------------------------------------------------------------------------

    def _fit(self, width: float, height: float) -> tuple[int, int]:
        """(width, height) in whole patches, about scale_resolution squared pixels."""
        scale = self.scale_resolution / math.sqrt(width * height)
        patch = self.patch_size
        return (
            max(patch, round(width * scale / patch) * patch),
            max(patch, round(height * scale / patch) * patch),
        )

    def _patches(self, image: Image.Image) -> tuple[torch.Tensor, list[int]]:
        """The image as (3, patch, patches * patch), patches row by row, and their grid."""
        data = np.asarray(image, dtype=np.float32) / 255.0
        data = (data - np.array(self.norm_mean, np.float32)) / np.array(self.norm_std, np.float32)
        pixels = torch.from_numpy(data.transpose(2, 0, 1).copy())
        patch = self.patch_size
        rows, cols = pixels.shape[1] // patch, pixels.shape[2] // patch
        pixels = pixels.reshape(3, rows, patch, cols, patch).permute(0, 2, 1, 3, 4)
        return pixels.reshape(3, patch, rows * cols * patch), [rows, cols]

    def _slices(self, image: Image.Image, max_slice_nums: int) -> list[Image.Image]:
        """The overview, then the slices row by row."""
        width, height = image.size
        out = [image.resize(self._fit(width, height), Image.Resampling.BICUBIC)]
        grid = self.get_sliced_grid(image.size, max_slice_nums)
        if grid is None:
            return out
        cols, rows = grid
        slice_w, slice_h = self._fit(width / cols, height / rows)
        refined = image.resize((slice_w * cols, slice_h * rows), Image.Resampling.BICUBIC)
        for r in range(rows):
            for c in range(cols):
                box = (c * slice_w, r * slice_h, (c + 1) * slice_w, (r + 1) * slice_h)
                out.append(refined.crop(box))
        return out

    @staticmethod
    def _image(item) -> Image.Image:
        if isinstance(item, Image.Image):
            return item.convert("RGB")
        array = np.asarray(item)
        if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
            array = array.transpose(1, 2, 0)
        if array.dtype != np.uint8:
            array = np.clip(array * (255.0 if array.max() <= 1.0 else 1.0), 0, 255)
            array = array.astype(np.uint8)
        return Image.fromarray(array).convert("RGB")

    def preprocess(
        self, images, do_pad=True, max_slice_nums=None, return_tensors=None, **kwargs
    ) -> BatchFeature:
        limit = self.max_slice_nums if max_slice_nums is None else max_slice_nums
        if isinstance(images, Image.Image) or (isinstance(images, np.ndarray) and images.ndim == 3):
            images = [[images]]
        elif images and (
            isinstance(images[0], Image.Image)
            or (isinstance(images[0], np.ndarray) and images[0].ndim == 3)
        ):
            images = [images]
        pixel_values, image_sizes, tgt_sizes = [], [], []
        for batch in images:
            pixels, sizes, grids = [], [], []
            for item in batch:
                image = self._image(item)
                sizes.append(list(image.size))
                for part in self._slices(image, limit):
                    values, grid = self._patches(part)
                    pixels.append(values)
                    grids.append(grid)
            pixel_values.append(pixels)
            image_sizes.append(torch.tensor(sizes, dtype=torch.int64).reshape(-1, 2))
            tgt_sizes.append(torch.tensor(grids, dtype=torch.int64).reshape(-1, 2))
        return BatchFeature(
            data={"pixel_values": pixel_values, "image_sizes": image_sizes, "tgt_sizes": tgt_sizes}
        )
