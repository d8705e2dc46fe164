"""What each built-in modality sends vLLM: chat parts of the right kind, per modality."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import soundfile

from mmrun.modalities.audio import AUDIO
from mmrun.modalities.image import IMAGE
from mmrun.modalities.video import VIDEO
from mmrun.plugins import builtin_registry
from tests.helpers.media import write_clip

REGISTRY = builtin_registry()


def test_an_image_chat_part_is_the_image_resized_as_the_model_needs() -> None:
    from PIL import Image

    image = Image.new("RGB", (1000, 500), (1, 2, 3))
    qwen = REGISTRY.get("image", "qwen2_5_vl")  # resizes to multiples of 28 within its budget
    part = IMAGE.chat_part(image, qwen)
    assert part["type"] == "image_pil"
    assert part["image_pil"].size == IMAGE.to_engine(image, qwen).size == (1008, 504)
    assert IMAGE.chat_part(image, REGISTRY.get("image", "llava"))["image_pil"] is image


def test_an_audio_chat_part_carries_the_clip_itself_not_an_image() -> None:
    rate = 16000
    waveform = (0.3 * np.sin(np.linspace(0, 200, rate))).astype(np.float32)
    part = AUDIO.chat_part((waveform, rate), REGISTRY.get("audio", "whisper"))
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"
    decoded, decoded_rate = soundfile.read(
        io.BytesIO(base64.b64decode(part["input_audio"]["data"]))
    )
    assert decoded_rate == rate and np.allclose(decoded, waveform, atol=1e-6)


def test_a_video_chat_part_is_the_sampled_frames_as_a_data_url(tmp_path: Path) -> None:
    import cv2

    data = write_clip(tmp_path / "clip.mp4").read_bytes()
    clip, info = VIDEO.with_options({"num_frames": 4}).decode(data, "clip.mp4")
    assert info == {
        "frames": 16,
        "fps": 8.0,
        "duration_s": 2.0,
        "sampled_frames": 4,
        "frame_width": 64,
        "frame_height": 48,
    }
    part = VIDEO.chat_part(clip, REGISTRY.get("video", "qwen2_5_vl"))
    assert part["type"] == "video_url"
    sent = tmp_path / "sent.avi"
    sent.write_bytes(base64.b64decode(part["video_url"]["url"].split(",", 1)[1]))
    capture = cv2.VideoCapture(str(sent))
    # The four sampled frames, over the clip's two seconds.
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 4
    assert capture.get(cv2.CAP_PROP_FPS) == 2.0
