"""Video decoding: a clip checked when it is fetched (OpenCV opens it from memory and reads
its first frame), and its frames sampled for the engine by vLLM's own video loader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmrun.capture import library_output
from mmrun.errors import MediaError, MissingDependencyError
from mmrun.registry import Decoded


@dataclass(frozen=True)
class Clip:
    """A video file checked to decode: its bytes, and what OpenCV says of it."""

    data: bytes
    frames: int
    fps: float
    width: int
    height: int

    @property
    def duration_s(self) -> float:
        return round(self.frames / self.fps, 3) if self.fps > 0 else 0.0


def decode_video(data: bytes, label: str) -> Decoded:
    """Open the clip with OpenCV (as vLLM's loader does: from memory) and read one frame."""
    import io

    try:
        import cv2
        import cv2.videoio_registry as registry
    except ImportError as exc:
        raise MissingDependencyError(
            "video needs OpenCV", hint="pip install opencv-python-headless"
        ) from exc
    backend = next(
        (b for b in registry.getStreamBufferedBackends() if registry.hasBackend(b)), None
    )
    if backend is None:
        raise MissingDependencyError(
            "this OpenCV build cannot read video from memory",
            hint="pip install opencv-python-headless",
        )
    stream: Any = io.BytesIO(data)  # OpenCV reads any object with read() and seek()
    # OpenCV's FFmpeg backend writes its complaints about a bad file straight to stderr.
    with library_output():
        capture = cv2.VideoCapture(stream, backend, [])
        try:
            ok = capture.isOpened()
            frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) if ok else 0
            fps = float(capture.get(cv2.CAP_PROP_FPS)) if ok else 0.0
            width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)) if ok else 0
            height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)) if ok else 0
            ok = ok and frames > 0 and capture.read()[0]
        finally:
            capture.release()
    if not ok:
        raise MediaError(
            f"{label} is not a readable video (OpenCV cannot decode it)",
            hint="give an MP4, AVI, MKV or WebM file",
        )
    clip = Clip(data, frames, fps, width, height)
    return clip, {
        "frames": frames,
        "fps": round(fps, 3),
        "width": width,
        "height": height,
        "duration_s": clip.duration_s,
    }


def load_video(data: bytes, num_frames: int) -> Any:
    """A clip's frames and metadata, sampled by vLLM's own video loader (OpenCV, uniform)."""
    from mmrun.engine.handle import vllm_module

    registry = vllm_module("vllm.multimodal.video").VIDEO_LOADER_REGISTRY
    return registry.load("opencv").load_bytes(data, num_frames=num_frames)
