"""Video frame sampling: which frames a clip gives, at what size, from files of any length,
and the one-line refusals of clips that cannot be sampled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mmrun.errors import MediaError
from mmrun.modalities.video import VIDEO
from mmrun.modalities.video.frames import FrameSampling, decode_clip_file, sample_frames
from tests.helpers.media import write_clip


def test_uniform_sampling_spans_the_whole_clip() -> None:
    assert FrameSampling(num_frames=4).indices(16, 8.0) == [0, 5, 10, 15]
    assert FrameSampling(num_frames=32).indices(16, 8.0) == list(range(16))
    assert FrameSampling(num_frames=1).indices(16, 8.0) == [0]


def test_fps_sampling_takes_that_rate_from_the_start_and_stops_at_num_frames() -> None:
    assert FrameSampling(num_frames=100, fps=2.0).indices(16, 8.0) == [0, 4, 8, 12]
    assert FrameSampling(num_frames=3, fps=2.0).indices(16, 8.0) == [0, 4, 8]
    # One frame a minute of a two-hour clip at 1 fps: 120 frames, capped at 16.
    assert len(FrameSampling(num_frames=16, fps=1 / 60).indices(7200, 1.0)) == 16


def test_max_pixels_shrinks_frames_keeping_their_shape_and_never_enlarges() -> None:
    sampling = FrameSampling(max_pixels=64 * 48 // 4)
    assert sampling.frame_size(64, 48) == (32, 24)
    assert sampling.frame_size(16, 12) == (16, 12)
    assert FrameSampling().frame_size(640, 480) == (640, 480)


def test_options_reach_the_decoder_and_default_to_vllms_sixteen(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "clip.mp4", frames=40, fps=8)
    (frames, metadata), info = VIDEO.decode(clip.read_bytes(), "clip.mp4")
    assert frames.shape == (16, 48, 64, 3) and info["sampled_frames"] == 16
    configured = VIDEO.with_options({"num_frames": 5, "fps": 1.0, "max_pixels": 768})
    (frames, metadata), info = configured.decode(clip.read_bytes(), "clip.mp4")
    assert metadata["frames_indices"] == [0, 8, 16, 24, 32]
    assert frames.shape == (5, 24, 32, 3)
    assert metadata["total_num_frames"] == 40 and metadata["fps"] == 8.0
    assert metadata["do_sample_frames"] is False


def test_sampled_frames_are_the_clips_frames_in_rgb(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "clip.mp4", frames=16, fps=8)
    frames, _ = sample_frames(str(clip), FrameSampling(num_frames=2), "clip.mp4")
    # write_clip paints frame i in BGR (i*15, 255-i*15, 128): RGB (128, 255-i*15, i*15).
    first, last = frames[0, 24, 32].astype(int), frames[1, 24, 32].astype(int)
    assert abs(first[0] - 128) < 12 and abs(first[2] - 0) < 12
    assert abs(last[2] - 15 * 15) < 12 and abs(last[1] - (255 - 15 * 15)) < 12


def _refusal(path: Path) -> str:
    with pytest.raises(MediaError) as caught:
        decode_clip_file(str(path), path.name, FrameSampling())
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_truncated_clip_is_one_line(tmp_path: Path) -> None:
    whole = write_clip(tmp_path / "whole.mp4", frames=40).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 3])
    assert "cut.mp4" in _refusal(cut)


def test_a_clip_without_frames_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom")
    assert "empty.mp4" in _refusal(empty)


def test_an_audio_only_container_is_one_line(tmp_path: Path) -> None:
    import numpy as np
    import soundfile

    audio = tmp_path / "speech.wav"
    soundfile.write(str(audio), np.zeros(16000, dtype=np.float32), 16000)
    assert "speech.wav" in _refusal(audio)


def test_bad_clips_exit_2_with_one_line_each(tmp_path: Path) -> None:
    whole = write_clip(tmp_path / "whole.mp4", frames=40).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(whole[: len(whole) // 3])
    (tmp_path / "zero.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom")
    for name in ("cut.mp4", "zero.mp4"):
        proc = subprocess.run(
            [sys.executable, "-m", "mmrun", "video", "--video", str(tmp_path / name), "--dry-run"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and name in lines[0], proc.stderr
