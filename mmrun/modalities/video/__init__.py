"""The video modality: ``mmrun video``. A plugin like any other: it declares its command, how
its files decode and how a clip reaches vLLM, and registers the models that take video.

A clip is checked when it is fetched (OpenCV opens it and reads its first frame, in a worker
thread); its frames are sampled once the engine has started, by vLLM's own video loader
(OpenCV, uniform sampling of ``NUM_FRAMES`` frames: what vLLM does for a ``video_url``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from mmrun.modalities.video.decode import Clip, decode_video, load_video
from mmrun.plugins import Register
from mmrun.registry import LoaderSpec, Modality

# Where the rows' requests come from (docs/models.md's "source" column).
DEFAULT_SOURCE = "vLLM's video example"

# vLLM's own default for a video given by URL (VideoMediaIO's num_frames).
NUM_FRAMES = 32


def _to_engine(clip: Clip, spec: LoaderSpec) -> Any:
    return load_video(clip.data, NUM_FRAMES)


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
    register.modality(VIDEO)
    for family in FAMILIES:
        register.models(import_module(f"{__name__}.{family}"))
