"""Sampling a clip's frames: which frames a prompt takes, and decoding only those.

A clip is opened with OpenCV (the reader vLLM's own video loader uses) from its file, so a
long video is never read whole into memory: the sampler seeks to each frame it needs, decodes
it, shrinks it to the pixel bound at once, and keeps only the sampled frames. What it holds is
at most ``num_frames`` frames of at most ``max_pixels`` pixels each, whatever the file's length.

The frames go to vLLM with the metadata its processors read (the HF video metadata vLLM's own
loader builds: total frames, native fps, duration, the sampled indices), so models that place
frames in time (Qwen2.5-VL, Qwen3-VL, GLM-4.1V) see where each frame was taken.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrun.capture import library_output
from mmrun.errors import MediaError, MissingDependencyError, UsageError
from mmrun.media.budget import reserve

# vLLM's single-image and video example samples 16 frames per clip (its --num-frames).
DEFAULT_NUM_FRAMES = 16
# Frames given as Python objects without their rate are taken at 2 a second: the rate of the
# stand-in clips vLLM builds for its video models, and of the frames Qwen's video processors
# sample by default.
GIVEN_FRAMES_FPS = 2.0
# The frames vLLM's video loader reads of a clip in a chat request (VideoMediaIO's default
# num_frames), where the sampled frames reach it as a small clip (encode_clip).
CHAT_MAX_FRAMES = 32


@dataclass(frozen=True)
class FrameSampling:
    """How a clip becomes frames.

    num_frames: the most frames one clip gives (uniformly over the clip, or at ``fps``).
    fps: sample at this rate instead of uniformly, still at most ``num_frames`` frames
        (from the start of the clip); None: ``num_frames`` frames spread over the whole clip.
    max_pixels: shrink each frame (keeping its aspect ratio) to at most this many pixels;
        None: frames keep the clip's size.
    """

    num_frames: int = DEFAULT_NUM_FRAMES
    fps: float | None = None
    max_pixels: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """What the request and the dry run record."""
        return {"num_frames": self.num_frames, "fps": self.fps, "max_pixels": self.max_pixels}

    def indices(self, total: int, native_fps: float) -> list[int]:
        """The frame indices to decode from a clip of ``total`` frames at ``native_fps``."""
        if total <= 0:
            return []
        if self.fps is not None and native_fps > 0:
            step = native_fps / self.fps
            count = min(self.num_frames, max(1, math.ceil(total / step)))
            return sorted({min(total - 1, round(i * step)) for i in range(count)})
        count = min(self.num_frames, total)
        if count == 1:
            return [0]
        return sorted({round(i * (total - 1) / (count - 1)) for i in range(count)})

    def frame_size(self, width: int, height: int) -> tuple[int, int]:
        """The size a frame is shrunk to (never enlarged)."""
        if self.max_pixels is None or width * height <= self.max_pixels:
            return width, height
        scale = math.sqrt(self.max_pixels / (width * height))
        return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))

    def frame_bytes(self, width: int, height: int) -> int:
        """What the sampled frames of one clip of this size hold (RGB, 8 bits)."""
        w, h = self.frame_size(width, height)
        return self.num_frames * w * h * 3


def sampling_from(options: Mapping[str, Any]) -> FrameSampling:
    """The sampling of a run's options (``num_frames``, ``fps``, ``max_pixels``; None or
    missing: the default)."""
    num_frames = options.get("num_frames")
    return FrameSampling(
        num_frames=DEFAULT_NUM_FRAMES if num_frames is None else int(num_frames),
        fps=None if options.get("fps") is None else float(options["fps"]),
        max_pixels=None if options.get("max_pixels") is None else int(options["max_pixels"]),
    )


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as exc:
        raise MissingDependencyError(
            "video needs OpenCV", hint="pip install opencv-python-headless"
        ) from exc
    return cv2


def sample_frames(path: str, sampling: FrameSampling, label: str) -> tuple[Any, dict[str, Any]]:
    """Decode the sampled frames of the clip at ``path``: ``(frames, metadata)``, frames an
    ``(n, height, width, 3)`` RGB array, metadata as vLLM's processors read it (vLLM passes it
    to the HF processor as is: only the keys of vLLM's own loader).

    Raises MediaError (one line) when the clip has no frame to sample or a sampled frame does
    not decode (a truncated file)."""
    import numpy as np

    cv2 = _cv2()
    with library_output():  # FFmpeg writes its complaints about a bad file to stderr
        capture = cv2.VideoCapture(path)
        try:
            if not capture.isOpened():
                raise _unreadable(label)
            total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            native_fps = float(capture.get(cv2.CAP_PROP_FPS))
            wanted = sampling.indices(total, native_fps)
            width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
            height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
            # What the sampled frames will hold, from the decoding budget (waits for room).
            reserve(
                FrameSampling(len(wanted), None, sampling.max_pixels).frame_bytes(width, height)
            )
            if not wanted:
                raise MediaError(
                    f"{label} has no video frames to sample",
                    hint="give a clip with a video stream (an audio-only file has none)",
                )
            frames = []
            position = -1
            for index in wanted:
                if index != position + 1:  # seek; consecutive frames are read in stream order
                    capture.set(cv2.CAP_PROP_POS_FRAMES, index)
                ok, frame = capture.read()
                if not ok:
                    raise MediaError(
                        f"{label}: frame {index} of {total} does not decode "
                        "(the file may be truncated)",
                        hint="re-encode or re-download the clip",
                    )
                position = index
                height, width = frame.shape[:2]
                size = sampling.frame_size(width, height)
                if size != (width, height):
                    frame = cv2.resize(frame, size, interpolation=cv2.INTER_AREA)
                frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
        finally:
            capture.release()
    metadata = {
        "total_num_frames": total,
        "fps": native_fps,
        "duration": total / native_fps if native_fps > 0 else 0.0,
        "video_backend": "opencv",
        "frames_indices": wanted,
        "do_sample_frames": False,
    }
    return np.stack(frames), metadata


def _unreadable(label: str) -> MediaError:
    return MediaError(
        f"{label} is not a readable video (OpenCV cannot open it)",
        hint="give an MP4, AVI, MKV or WebM file",
    )


def decode_clip(data: bytes, label: str, sampling: FrameSampling) -> tuple[Any, dict[str, Any]]:
    """A clip given as bytes (a data: URI, a download): sampled as :func:`decode_clip_file`
    samples a file, from a temporary copy (OpenCV seeks in files)."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".video") as copy:
        copy.write(data)
        copy.flush()
        return decode_clip_file(copy.name, label, sampling)


def decode_clip_file(path: str, label: str, sampling: FrameSampling) -> tuple[Any, dict[str, Any]]:
    """The clip's sampled frames with their metadata (what vLLM receives), and facts about the
    clip for the output (with ``num_frames``, the frames asked for, where the clip has fewer:
    it gives every frame it has)."""
    frames, metadata = sample_frames(path, sampling, label)
    return (frames, metadata), _clip_info(frames, metadata, sampling)


def _clip_info(frames: Any, metadata: Mapping[str, Any], sampling: FrameSampling) -> dict[str, Any]:
    count, height, width = frames.shape[:3]
    info = {
        "frames": metadata["total_num_frames"],
        "fps": round(metadata["fps"], 3),
        "duration_s": round(metadata["duration"], 3),
        "sampled_frames": count,
        "frame_width": width,
        "frame_height": height,
    }
    if sampling.fps is None and count < sampling.num_frames:
        info["num_frames"] = sampling.num_frames  # a clip with fewer frames than asked for
    return info


def frames_from_object(
    value: Any, label: str, sampling: FrameSampling
) -> tuple[Any, dict[str, Any]] | None:
    """A clip given as a Python object (``Modality.from_object``): its frames, a
    T x H x W x 3 array of uint8 (RGB) or a list of PIL images or H x W x 3 arrays, or
    ``(frames, fps)`` with the rate they were taken at (else ``GIVEN_FRAMES_FPS``). Sampled
    and shrunk as a file's frames are, with the same metadata. None for anything else (a
    list of clips is several items)."""
    fps: float = GIVEN_FRAMES_FPS
    frames = value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], numbers.Real):
        frames, fps = value
        if isinstance(fps, bool) or not 0 < fps < math.inf:
            raise UsageError(
                f"{label}: a frame rate of {fps} in (frames, fps)",
                hint="give the frames' rate as a positive number of frames a second",
            )
    given = _given_frames(frames, label)
    if given is None:
        return None
    import numpy as np

    total = len(given)
    wanted = sampling.indices(total, float(fps))
    # A copy: the caller's frames may change after the call.
    sampled = np.stack([_shrunk(_rgb(given[i]), sampling) for i in wanted])
    metadata = {
        "total_num_frames": total,
        "fps": float(fps),
        "duration": total / fps,
        "video_backend": "opencv",
        "frames_indices": wanted,
        "do_sample_frames": False,
    }
    return (sampled, metadata), _clip_info(sampled, metadata, sampling)


def _given_frames(frames: Any, label: str) -> Any:
    """Frames given as a T x H x W x 3 uint8 array or a list of frames of one size, checked;
    None for what is no clip (a list of clips)."""
    import numpy as np

    from mmrun.media.objects import described, is_array, is_pil_image

    if is_pil_image(frames) or (is_array(frames) and len(frames.shape) == 3):
        raise UsageError(
            f"{label} is one image, not a clip's frames",
            hint="give the frames as a T x H x W x 3 uint8 array or a list of images",
        )
    if is_array(frames):
        array = np.asarray(frames)
        if array.ndim != 4 or array.shape[3] != 3 or array.dtype != np.uint8 or 0 in array.shape:
            raise UsageError(
                f"{label}: video frames are a T x H x W x 3 array of uint8 (RGB), "
                f"not {described(array)}",
                hint="convert them, e.g. frames.astype('uint8') for values 0-255",
            )
        return array
    if not isinstance(frames, list | tuple) or not frames:
        return None
    if not all(is_pil_image(f) or (is_array(f) and len(f.shape) == 3) for f in frames):
        return None  # a list of clips
    sizes = sorted({_frame_size(f, f"{label} frame {i}") for i, f in enumerate(frames)})
    if len(sizes) > 1:
        (w0, h0), (w1, h1) = sizes[0], sizes[-1]
        raise UsageError(
            f"{label}: the frames differ in size ({w0}x{h0} and {w1}x{h1})",
            hint="give frames of one size",
        )
    return frames


def _frame_size(frame: Any, label: str) -> tuple[int, int]:
    """A frame's width and height; UsageError for an array that is no RGB frame."""
    import numpy as np

    from mmrun.media.objects import described, is_pil_image

    if is_pil_image(frame):
        return int(frame.width), int(frame.height)
    array = np.asarray(frame)
    if array.shape[2] != 3 or array.dtype != np.uint8 or 0 in array.shape:
        raise UsageError(
            f"{label}: a frame is an H x W x 3 array of uint8 (RGB), not {described(array)}",
            hint="convert it, e.g. frame.astype('uint8') for values 0-255",
        )
    return int(array.shape[1]), int(array.shape[0])


def _rgb(frame: Any) -> Any:
    import numpy as np

    from mmrun.media.objects import is_pil_image

    if is_pil_image(frame):
        return np.asarray(frame.convert("RGB") if frame.mode != "RGB" else frame)
    return np.asarray(frame)


def _shrunk(frame: Any, sampling: FrameSampling) -> Any:
    """A frame shrunk to ``max_pixels`` as a file's frames are."""
    height, width = frame.shape[:2]
    size = sampling.frame_size(width, height)
    if size == (width, height):
        return frame
    cv2 = _cv2()
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


def encode_clip(frames: Any, fps: float) -> bytes:
    """Sampled frames as a small Motion-JPEG AVI, for a ``video_url`` part of a chat request:
    vLLM decodes it with its own loader, which then takes every frame (up to its own 32)."""
    import tempfile

    cv2 = _cv2()
    height, width = frames.shape[1:3]
    with tempfile.NamedTemporaryFile(suffix=".avi") as out:
        writer = cv2.VideoWriter(out.name, cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
        try:
            for frame in frames:
                writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        with open(out.name, "rb") as file:
            return file.read()


def write_sample_clip(path: Path, seconds: float = 4.0, fps: int = 8) -> None:
    """A small clip drawn here (a ball bouncing across a field under a sky, 160x120,
    Motion-JPEG): the video command's default clip, the same bytes on every machine and no
    download."""
    import numpy as np

    cv2 = _cv2()
    width, height, count = 160, 120, int(seconds * fps)
    background = np.zeros((height, width, 3), dtype=np.uint8)
    background[: height * 2 // 3] = (235, 206, 135)  # sky (BGR)
    background[height * 2 // 3 :] = (60, 160, 70)  # grass
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
    try:
        for i in range(count):
            frame = background.copy()
            t = i / max(count - 1, 1)
            x = int(12 + t * (width - 24))
            y = int(height * 2 // 3 - 10 - abs(math.sin(3 * math.pi * t)) * 60)
            cv2.circle(frame, (x, y), 10, (30, 60, 220), -1)
            writer.write(frame)
    finally:
        writer.release()
