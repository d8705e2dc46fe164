"""The video modality: ``mmrun video``. A plugin like any other: it declares its command, how
its files decode and how a clip reaches vLLM, and registers the models that take video.

A clip is checked when it is fetched (OpenCV opens it and reads its first frame, in a worker
thread); its frames are sampled once the engine has started, by vLLM's own video loader
(OpenCV, uniform sampling of ``NUM_FRAMES`` frames: what vLLM does for a ``video_url``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from mmrun.capture import library_output
from mmrun.errors import MediaError, MissingDependencyError
from mmrun.registry import Decoded, LoaderSpec, Modality, Register

# Where the rows' requests come from (docs/models.md's "source" column).
DEFAULT_SOURCE = "vLLM's video example"

# vLLM's own default for a video given by URL (VideoMediaIO's num_frames).
NUM_FRAMES = 32


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


def _to_engine(clip: Clip, spec: LoaderSpec) -> Any:
    from mmrun import engine

    return engine.load_video(clip.data, NUM_FRAMES)


def _chat_part(clip: Clip, spec: LoaderSpec) -> dict[str, Any]:
    """A clip as a ``video_url`` part: vLLM's chat API decodes it with the same loader."""
    url = "data:video/mp4;base64," + base64.b64encode(clip.data).decode()
    return {"type": "video_url", "video_url": {"url": url}}


def _describe(info: Mapping[str, Any]) -> str:
    return f"{info['width']}x{info['height']}, {info['frames']} frames, {info['duration_s']:.1f}s"


VIDEO = Modality(
    name="video",
    assets=(),
    questions={1: "Why is this video funny?"},
    default_count=1,
    min_count=1,
    temperature=0.0,
    max_tokens=256,
    seed=None,
    default_model="qwen2_5_vl",
    decode=decode_video,
    chat_part=_chat_part,
    short_option="",
    extensions=(".mp4", ".avi", ".mov", ".mkv", ".webm"),
    to_engine=_to_engine,
    describe=_describe,
    summary="Run a video-language model on video clips through vLLM.",
    examples=(
        "mmrun video -m qwen2_5_vl --video clip.mp4",
        "mmrun video -m qwen2_5_vl --video 'clips/*.mp4' -o answers.jsonl",
    ),
)

FAMILIES = ("qwen",)


def register(register: Register) -> None:
    """The built-in plugin's hook, called as any third-party plugin's is."""
    register(VIDEO, *(import_module(f"{__name__}.{family}") for family in FAMILIES))
