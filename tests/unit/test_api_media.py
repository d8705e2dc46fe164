"""Media given to mmrun's Python API as objects (a PIL image, arrays of pixels, of audio
samples and of video frames): what reaches the stand-in vLLM's LLM.generate, and the one-line
UsageError of an object of the wrong shape or type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import mmrun
from mmrun.errors import UsageError
from mmrun.media import objects

IMAGE_KEY = "mistral3"  # generate, images as they are (no resize): offline
AUDIO_KEY = "whisper"
VIDEO_KEY = "qwen2_5_vl"  # generate for video, frames with their metadata


@pytest.fixture(autouse=True)
def nothing_held_after() -> Any:
    yield
    assert objects._held == {}  # every call lets go of the objects it was given


def engine_media(fake_vllm: Any, kind: str) -> list[Any]:
    """The media of the last request LLM.generate received."""
    request = fake_vllm.submitted[-1]
    assert isinstance(request, dict), request
    assert list(request["multi_modal_data"]) == [kind]
    items: list[Any] = request["multi_modal_data"][kind]
    return items


def pixels(size: tuple[int, int], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)


def test_images_as_an_array_and_as_pil_images(fake_vllm: Any) -> None:
    array = pixels((6, 10))
    grey = Image.new("L", (4, 3), 90)
    with mmrun.Model(IMAGE_KEY) as model:
        one = model.ask("What?", array)
        (sent,) = engine_media(fake_vllm, "image")
        two = model.ask("What?", [grey, array])
        both = engine_media(fake_vllm, "image")
    assert one.ok and one.media == ("item 0 image",)
    assert sent.mode == "RGB" and sent.size == (10, 6)
    assert np.array_equal(np.asarray(sent), array)
    assert two.ok and two.media == ("item 0 image[0]", "item 0 image[1]")
    assert [b.mode for b in both] == ["RGB", "RGB"]
    assert np.array_equal(np.asarray(both[0]), np.full((3, 4, 3), 90, np.uint8))
    assert np.array_equal(np.asarray(both[1]), array)


def test_audio_as_samples_and_their_rate(fake_vllm: Any) -> None:
    wave = np.sin(np.linspace(0, 200, 8000)).astype(np.float64)
    pcm = (wave * 32767).astype(np.int16)
    with mmrun.Model(AUDIO_KEY) as model:
        floats = model.ask(None, (wave, 8000))
        ((samples, rate),) = engine_media(fake_vllm, "audio")
        ints = model.ask(None, (pcm, np.int64(8000)))
        ((from_pcm, pcm_rate),) = engine_media(fake_vllm, "audio")
    assert floats.ok and floats.media == ("item 0 audio",)
    assert samples.dtype == np.float32 and rate == 8000 and type(rate) is int
    assert np.array_equal(samples, wave.astype(np.float32))
    assert ints.ok and pcm_rate == 8000
    assert from_pcm.dtype == np.float32
    assert np.allclose(from_pcm, pcm / 32768.0)


def test_video_frames_reach_vllm_with_the_metadata_of_a_files(
    fake_vllm: Any, tmp_path: Path
) -> None:
    from mmrun.modalities.video.frames import FrameSampling, decode_clip_file, write_sample_clip

    clip = tmp_path / "clip.avi"
    write_sample_clip(clip)
    (_, file_metadata), _ = decode_clip_file(str(clip), "clip", FrameSampling())
    frames = np.stack([pixels((8, 12), seed) for seed in range(10)])
    options = {"modality_options": {"num_frames": 4}}
    with mmrun.Model(VIDEO_KEY, modality="video", **options) as model:
        given = model.ask(None, frames)
        ((sent, metadata),) = engine_media(fake_vllm, "video")
        model.ask(None, ([Image.fromarray(f) for f in frames[:3]], 6))
        ((listed, listed_metadata),) = engine_media(fake_vllm, "video")
    assert given.ok and given.media == ("item 0 video",)
    assert set(metadata) == set(file_metadata)
    assert metadata == {
        "total_num_frames": 10,
        "fps": 2.0,
        "duration": 5.0,
        "video_backend": "opencv",
        "frames_indices": [0, 3, 6, 9],
        "do_sample_frames": False,
    }
    assert np.array_equal(sent, frames[[0, 3, 6, 9]])
    assert np.array_equal(listed, frames[:3])
    assert listed_metadata["fps"] == 6.0 and listed_metadata["frames_indices"] == [0, 1, 2]
    assert listed_metadata["duration"] == 0.5


def test_frames_are_shrunk_to_max_pixels_as_a_files_are(fake_vllm: Any) -> None:
    frames = np.zeros((2, 40, 60, 3), np.uint8)
    options = {"modality_options": {"max_pixels": 600}}
    with mmrun.Model(VIDEO_KEY, modality="video", **options) as model:
        model.ask(None, frames)
        ((sent, _),) = engine_media(fake_vllm, "video")
    assert sent.shape == (2, 20, 30, 3)


def test_the_request_shows_the_objects_by_their_place() -> None:
    req = mmrun.request_for(IMAGE_KEY, "What?", [pixels((6, 10)), Image.new("RGB", (3, 2))])
    shown = [(m["source"], m["path"], m["width"], m["height"]) for m in req.media]
    assert shown == [("media[0]", None, 10, 6), ("media[1]", None, 3, 2)]
    audio = mmrun.request_for(AUDIO_KEY, None, (np.zeros(16000, np.float32), 16000))
    assert audio.media[0]["duration_s"] == 1.0 and audio.media[0]["sample_rate"] == 16000
    assert audio.media[0]["size_bytes"] == 64000


BAD = [
    (
        "image",
        np.zeros((4, 4), np.uint8),
        "item 0 image: an image array is height x width x 3 of uint8 (RGB), not 4 x 4 of uint8",
    ),
    (
        "image",
        np.zeros((4, 4, 3), np.float32),
        "item 0 image: an image array is height x width x 3 of uint8 (RGB), "
        "not 4 x 4 x 3 of float32",
    ),
    ("image", 42, "item 0 image is an object of type int"),
    ("audio", np.zeros(100, np.float32), "item 0 audio: audio samples need their sample rate"),
    (
        "audio",
        (np.zeros((2, 100), np.float32), 16000),
        "item 0 audio: audio samples are a 1-D array (mono) of floats, int16 or int32, "
        "not 2 x 100 of float32",
    ),
    (
        "audio",
        (np.zeros(100, np.uint8), 16000),
        "item 0 audio: audio samples are a 1-D array (mono) of floats, int16 or int32, "
        "not 100 of uint8",
    ),
    (
        "audio",
        (np.zeros(100, np.float32), "16k"),
        "item 0 audio: the sample rate of (samples, sample_rate) is a str",
    ),
    ("audio", (np.zeros(100, np.float32), 22050.5), "item 0 audio: a sample rate of 22,050.5 Hz"),
    ("audio", (np.zeros(0, np.float32), 16000), "item 0 audio: the audio array holds no samples"),
    (
        "audio",
        (np.array([0.0, np.nan], np.float32), 16000),
        "item 0 audio: the audio samples hold not-a-number or infinite values",
    ),
    ("video", np.zeros((4, 4, 3), np.uint8), "item 0 video is one image, not a clip's frames"),
    (
        "video",
        np.zeros((2, 4, 4, 3), np.float64),
        "item 0 video: video frames are a T x H x W x 3 array of uint8 (RGB), "
        "not 2 x 4 x 4 x 3 of float64",
    ),
    (
        "video",
        [np.zeros((4, 4, 3), np.uint8), Image.new("RGB", (5, 4))],
        "item 0 video: the frames differ in size (4x4 and 5x4)",
    ),
    (
        "video",
        [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)],
        "item 0 video frame 1: a frame is an H x W x 3 array of uint8 (RGB), not 4 x 4 x 4 of uint8",
    ),
    (
        "video",
        (np.zeros((2, 4, 4, 3), np.uint8), 0),
        "item 0 video: a frame rate of 0 in (frames, fps)",
    ),
]


@pytest.mark.parametrize(("modality", "value", "message"), BAD, ids=[b[2] for b in BAD])
def test_an_object_of_the_wrong_shape_or_type_is_one_usage_error(
    fake_vllm: Any, modality: str, value: Any, message: str
) -> None:
    key = {"image": IMAGE_KEY, "audio": AUDIO_KEY, "video": VIDEO_KEY}[modality]
    with mmrun.Model(key, modality=modality) as model:
        submitted = len(fake_vllm.submitted)
        with pytest.raises(UsageError) as raised:
            model.ask(None, value)
        # In a run, the same object is that item's error; the other items are answered.
        results = {r.id: r for r in model.run([{"id": "bad", modality: value}])}
    assert raised.value.message == message
    assert "\n" not in str(raised.value) and raised.value.hint
    error = results["bad"].error
    assert error is not None and error.stage == "request" and error.message == str(raised.value)
    assert len(fake_vllm.submitted) == submitted  # nothing reached the engine


def test_objects_in_a_run_and_a_results_file(fake_vllm: Any, tmp_path: Path) -> None:
    arrays = [pixels((4, 4), seed) for seed in range(3)]
    rows = [{"id": f"a{i}", "image": a} for i, a in enumerate(arrays)]
    with mmrun.Model(IMAGE_KEY) as model:
        stream = model.run(rows * 3)
        next(stream)
        stream.close()  # the objects of the prompts never read are let go
        written = model.write(rows, tmp_path / "out.jsonl")
        again = model.write(rows, tmp_path / "out.jsonl")  # all done: nothing held stays
    assert sorted(r.id for r in written) == ["a0", "a1", "a2"] and all(r.ok for r in written)
    assert [r.media for r in sorted(written, key=lambda r: r.id)] == [
        ("item 0 image",),
        ("item 1 image",),
        ("item 2 image",),
    ]
    assert again == []
