"""The video modality: ``mmrun video``. A plugin like any other: it declares its command, how
its files decode and how a clip reaches vLLM, and registers the models that take video.

A clip is decoded when it is fetched, in a worker thread and within the decoding memory
budget: only the frames a prompt takes are read (``--num-frames``, ``--fps``), each shrunk to
``--max-pixels`` at once (mmrun.modalities.video.frames), and they reach vLLM with the metadata
its processors read. A clip that cannot be sampled is refused in one line.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from dataclasses import replace
from importlib import import_module
from typing import Any

from mmrun.modalities.video.frames import (
    CHAT_MAX_FRAMES,
    DEFAULT_NUM_FRAMES,
    FrameSampling,
    decode_clip,
    decode_clip_file,
    encode_clip,
    frames_from_object,
    sampling_from,
    write_sample_clip,
)
from mmrun.plugins import Register
from mmrun.registry import Asset, Decoded, LoaderSpec, MediaOption, Modality

VIDEO_OPTIONS = (
    MediaOption(
        "num_frames",
        "--num-frames",
        int,
        f"Frames sampled from each clip, spread over it (default {DEFAULT_NUM_FRAMES}).",
        default=DEFAULT_NUM_FRAMES,
        # A chat request carries the frames as a clip, which vLLM's video loader reads: at
        # most its own number of frames (VideoMediaIO's num_frames), spread over the clip.
        maximum={"chat": CHAT_MAX_FRAMES},
        maximum_note=f"vLLM's video loader reads at most {CHAT_MAX_FRAMES} frames of a clip "
        "in a chat request; --method generate takes them all",
    ),
    MediaOption(
        "fps",
        "--fps",
        float,
        "Sample this many frames a second from the start (at most --num-frames).",
        minimum=0.001,
    ),
    MediaOption(
        "max_pixels",
        "--max-pixels",
        int,
        "Shrink each frame to at most this many pixels, keeping its shape.",
        minimum=64,
    ),
)


def _decode(data: bytes, label: str, sampling: FrameSampling) -> Decoded:
    return decode_clip(data, label, sampling)


def _decode_file(path: str, label: str, sampling: FrameSampling) -> Decoded:
    return decode_clip_file(path, label, sampling)


def _from_object(value: Any, label: str, sampling: FrameSampling) -> Decoded | None:
    return frames_from_object(value, label, sampling)


def _chat_part(item: Any, spec: LoaderSpec) -> dict[str, Any]:
    """The sampled frames as a ``video_url`` part (a small Motion-JPEG clip, at the rate the
    frames were sampled at, so that the model sees the same span of time)."""
    frames, metadata = item
    span = metadata["duration"] or 1.0
    fps = max(len(frames) / span, 0.01)
    url = "data:video/x-msvideo;base64," + base64.b64encode(encode_clip(frames, fps)).decode()
    return {"type": "video_url", "video_url": {"url": url}}


def _configure(modality: Modality, values: Mapping[str, Any]) -> Modality:
    """The modality with this run's frame sampling bound into its decoder."""
    sampling = sampling_from(values)
    return replace(
        modality,
        decode=functools.partial(_decode, sampling=sampling),
        decode_file=functools.partial(_decode_file, sampling=sampling),
        from_object=functools.partial(_from_object, sampling=sampling),
    )


def _describe(info: Mapping[str, Any]) -> str:
    text = (
        f"{info['frames']} frames, {info['duration_s']:.1f}s; "
        f"{info['sampled_frames']} sampled at {info['frame_width']}x{info['frame_height']}"
    )
    if "num_frames" in info:  # the clip has fewer frames than --num-frames asked for
        text += f" (all it has, of --num-frames {info['num_frames']})"
    return text


# The default clip is drawn by mmrun at first use and cached like the other default media:
# a few kilobytes, the same on every machine, and a dry run or a first try needs no network.
SAMPLE_CLIP = Asset("bouncing_ball", "", "bouncing_ball.avi", make=write_sample_clip)

VIDEO = Modality(
    name="video",
    assets=(SAMPLE_CLIP,),
    questions={1: "Why is this video funny?"},
    default_count=1,
    min_count=1,
    temperature=0.0,
    max_tokens=256,
    seed=None,
    default_model="qwen2_5_vl",
    decode=functools.partial(_decode, sampling=FrameSampling()),
    decode_file=functools.partial(_decode_file, sampling=FrameSampling()),
    from_object=functools.partial(_from_object, sampling=FrameSampling()),
    chat_part=_chat_part,
    short_option="",
    extensions=(".mp4", ".avi", ".mov", ".mkv", ".webm"),
    column_names=("video", "videos", "mp4", "webm"),
    feature_type="Video",
    openai_parts=("video_url",),
    describe=_describe,
    options=VIDEO_OPTIONS,
    configure=_configure,
    # vLLM's single-image and video example runs most of its video models on an image and a
    # clip in one prompt ("image+video"), with this question.
    companions=("image",),
    companion_questions={"image": "What is shown in the image? What happens in the video?"},
    summary="Run a video-language model on video clips through vLLM.",
    examples=(
        "mmrun video -m qwen2_5_vl --video clip.mp4",
        "mmrun video -m qwen2_5_vl --video 'clips/*.mp4' -o answers.jsonl",
        "mmrun video -m qwen3_vl --video talk.mp4 --fps 0.5 --num-frames 64 --max-pixels 200704",
        "mmrun video -m qwen2_5_vl --video clip.mp4 --image photo.jpg",
    ),
)

FAMILIES = (
    "ernie",
    "exaone",
    "gemma",
    "glm",
    "intern",
    "keye",
    "llava",
    "minicpm",
    "molmo",
    "ovis",
    "pangu",
    "qwen",
)


def register(register: Register) -> None:
    """The built-in plugin's hook, called as any third-party plugin's is."""
    register.modality(VIDEO)
    for family in FAMILIES:
        register.models(import_module(f"{__name__}.{family}"))
