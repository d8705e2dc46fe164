"""Media the tests generate."""

from __future__ import annotations

from pathlib import Path


def write_clip(path: Path, frames: int = 16, fps: int = 8) -> Path:
    """A small MP4 (64x48, ``frames`` frames of changing colour) written with OpenCV."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (64, 48))
    for i in range(frames):
        writer.write(np.full((48, 64, 3), (i * 15 % 256, 255 - i * 15 % 256, 128), dtype=np.uint8))
    writer.release()
    return path
