# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo2's remote video processor (Molmo2VideoProcessor), written from what vLLM
0.32's molmo2.py reads: the settings ``size`` (a frame's height and width once resized),
``patch_size``, ``pooling_size`` (rows, cols of patches pooled into one token),
``num_frames`` (the most frames a clip gives), ``frame_sample_mode``, ``max_fps`` and
``sampling_fps`` (how vLLM samples a clip that asks for it; mmrun sends frames it sampled
itself, with ``do_sample_frames`` off).

:meth:`preprocess` takes clips (each a (frames, height, width, 3) array, or a list of frames)
and returns, per clip, every frame resized to ``size`` and normalized:
``pixel_values_videos`` (frames, patches per frame, patch * patch * 3),
``video_token_pooling`` (per pooled token the frame x patch indices it pools, -1 past the
grid's edges) and ``video_grids`` (frames, pooled rows, pooled cols). With
``do_sample_frames`` it first keeps ``num_frames`` frames spread evenly over the clip, the
last one included."""

from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.video_processing_utils import VideoProcessorMixin


def _pool_indices(rows: int, cols: int, pool_h: int, pool_w: int, index: np.ndarray) -> np.ndarray:
    out_rows = -(-rows // pool_h)
    out_cols = -(-cols // pool_w)
    padded = np.full((out_rows * pool_h, out_cols * pool_w), -1, dtype=np.int64)
    padded[:rows, :cols] = index
    windows = padded.reshape(out_rows, pool_h, out_cols, pool_w).transpose(0, 2, 1, 3)
    return windows.reshape(out_rows * out_cols, pool_h * pool_w)


class Molmo2VideoProcessor(VideoProcessorMixin):
    model_input_names = ("pixel_values_videos", "video_token_pooling", "video_grids")

    def __init__(
        self,
        size: dict[str, int] | None = None,
        patch_size: int = 14,
        pooling_size: tuple[int, int] = (3, 3),
        num_frames: int = 384,
        frame_sample_mode: str = "uniform_last_frame",
        max_fps: int = 2,
        sampling_fps: int = 2,
        image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5),
        image_std: tuple[float, float, float] = (0.5, 0.5, 0.5),
        do_sample_frames: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.size = dict(size or {"height": 378, "width": 378})
        self.patch_size = patch_size
        self.pooling_size = list(pooling_size)
        self.num_frames = num_frames
        self.frame_sample_mode = frame_sample_mode
        self.max_fps = max_fps
        self.sampling_fps = sampling_fps
        self.image_mean = list(image_mean)
        self.image_std = list(image_std)
        self.do_sample_frames = do_sample_frames

    def sampled_indices(self, total: int) -> np.ndarray:
        """``num_frames`` frame indices spread evenly over ``total``, the last one included."""
        return np.linspace(0, total - 1, num=min(self.num_frames, total)).round().astype(int)

    def _frames(self, frames: Any) -> np.ndarray:
        """The frames resized to ``size`` and cut into normalized patches."""
        height, width, patch = self.size["height"], self.size["width"], self.patch_size
        mean = np.array(self.image_mean, np.float32)
        std = np.array(self.image_std, np.float32)
        out = []
        for frame in frames:
            image = Image.fromarray(np.asarray(frame).astype(np.uint8)).convert("RGB")
            pixels = np.asarray(image.resize((width, height), Image.BILINEAR), np.float32)
            pixels = (pixels / 255.0 - mean) / std
            rows, cols = height // patch, width // patch
            pixels = pixels[: rows * patch, : cols * patch]
            pixels = pixels.reshape(rows, patch, cols, patch, 3).transpose(0, 2, 1, 3, 4)
            out.append(pixels.reshape(rows * cols, patch * patch * 3))
        return np.stack(out)

    def preprocess(
        self,
        videos: Any,
        video_metadata: Any = None,
        do_sample_frames: bool | None = None,
        return_tensors: Any = None,
        **kwargs: Any,
    ) -> BatchFeature:
        if do_sample_frames is None:
            do_sample_frames = self.do_sample_frames
        clips = list(videos) if isinstance(videos, (list, tuple)) else [videos]
        # A batch of one clip may come nested: [[clip]].
        if len(clips) == 1 and isinstance(clips[0], (list, tuple)):
            inner = clips[0]
            if inner and np.asarray(inner[0]).ndim == 4:
                clips = list(inner)
        rows = self.size["height"] // self.patch_size
        cols = self.size["width"] // self.patch_size
        pool_h, pool_w = self.pooling_size
        pixels, pooling, grids = [], [], []
        for clip in clips:
            frames = np.asarray(clip)
            if do_sample_frames:
                frames = frames[self.sampled_indices(len(frames))]
            patches = self._frames(frames)
            per_frame = rows * cols
            for f in range(len(frames)):
                index = f * per_frame + np.arange(per_frame).reshape(rows, cols)
                pooling.append(_pool_indices(rows, cols, pool_h, pool_w, index))
            pixels.append(patches)
            grids.append([len(frames), -(-rows // pool_h), -(-cols // pool_w)])
        return BatchFeature(
            {
                "pixel_values_videos": torch.from_numpy(np.concatenate(pixels)),
                "video_token_pooling": torch.from_numpy(np.concatenate(pooling)),
                "video_grids": torch.tensor(grids, dtype=torch.long),
            }
        )
