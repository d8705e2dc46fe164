"""The first commands of the README without a network: `mmrun video` with its default clip
(drawn by mmrun, no download), `-i` refused in `mmrun video`, and dry runs of the default
images and audio with the network cut (the request shown, the media as placeholders, one note
line)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from mmrun.media.download import asset_path
from mmrun.modalities.video import SAMPLE_CLIP
from tests.helpers.cli import in_process


def closed_port_url() -> str:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def network_cut(isolated_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An empty media cache, the Hub offline with an empty Hugging Face cache, and the default
    media served from a port where nothing listens: every download is refused at once."""
    base = closed_port_url()
    monkeypatch.setenv("MMRUN_ASSETS_BASE_URL", base)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.setenv("COLUMNS", "200")
    return base


def test_video_without_a_clip_runs_on_its_default_clip(network_cut: str) -> None:
    result = in_process(["video", "-m", "qwen2_5_vl", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "qwen2_5_vl (Qwen/Qwen2.5-VL-3B-Instruct) · video · generate",
        "question: Why is this video funny?",
        "media: bouncing_ball 32 frames, 4.0s; 16 sampled at 160x120",
    ]
    assert "<|vision_start|><|video_pad|><|vision_end|>Why is this video funny?" in result.stdout
    clip = asset_path(SAMPLE_CLIP.mirror_name)
    assert clip.is_file() and clip.stat().st_size < 100_000  # made once, cached, small
    again = in_process(["video", "-m", "qwen2_5_vl", "--dry-run", "--json"])
    media = json.loads(again.stdout)["media"]
    assert [(m["source"], m["path"]) for m in media] == [("bouncing_ball", str(clip))]


def test_video_default_clip_is_one_clip() -> None:
    result = in_process(["video", "-m", "qwen2_5_vl", "-n", "2", "--dry-run"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "mmrun: error: -n 2 is out of range for qwen2_5_vl: it takes 1 video per prompt "
        "(use -n 1, or name files with --video)"
    ]


@pytest.mark.parametrize("args", [["-i", "clip.mp4"], ["-i", "photo.jpg", "--video", "a.mp4"]])
def test_dash_i_is_refused_in_the_video_command(args: list[str]) -> None:
    result = in_process(["video", "-m", "qwen2_5_vl", *args, "--dry-run"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "mmrun: error: -i is not an option of `mmrun video`: name the video with --video "
        "(--image adds an image to every prompt) (see `mmrun video --help`)"
    ]


def test_readme_image_dry_run_with_the_network_cut(network_cut: str) -> None:
    result = in_process(["image", "-m", "qwen2_5_vl", "-n", "4", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:7] == [
        "qwen2_5_vl (Qwen/Qwen2.5-VL-3B-Instruct) · image · generate",
        "question: What is the content of each image?",
        "media: duck (not fetched)",
        "media: lion (not fetched)",
        "media: flycatcher (not fetched)",
        "media: somefish (not fetched)",
        f"note: 4 default images could not be fetched (download of {network_cut}/duck.jpg "
        "failed: [Errno 111] Connection refused): the request below holds their names in "
        "place of the image; name your own with --image, or set MMRUN_ASSETS_BASE_URL to a "
        "mirror",
    ]
    assert '"limit_mm_per_prompt": {"image": 4, "audio": 0, "video": 0}' in result.stdout
    # qwen2_5_vl's processor renders its prompt: offline and not cached, the dry run says so.
    assert "prompt (not rendered)" in result.stdout
    assert "not rendered: the model's processor (Qwen/Qwen2.5-VL-3B-Instruct)" in result.stdout


def test_readme_audio_dry_run_with_the_network_cut(network_cut: str) -> None:
    result = in_process(["audio", "-m", "whisper", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2:4] == [
        "media: mary_had_lamb (not fetched)",
        f"note: the default audio could not be fetched (download of {network_cut}/"
        "mary_had_lamb.ogg failed: [Errno 111] Connection refused): the request below holds "
        "its name in place of the audio; name your own with --audio, or set "
        "MMRUN_ASSETS_BASE_URL to a mirror",
    ]
    assert "<|startoftranscript|>" in result.stdout


def test_dry_run_json_with_the_network_cut_marks_the_placeholders(network_cut: str) -> None:
    result = in_process(["audio", "-m", "whisper", "--dry-run", "--json"])
    assert result.exit_code == 0, result.stderr
    (media,) = json.loads(result.stdout)["media"]
    assert media == {
        "source": "mary_had_lamb",
        "path": None,
        "sha256": "",
        "size_bytes": 0,
        "not_fetched": f"download of {network_cut}/mary_had_lamb.ogg failed: "
        "[Errno 111] Connection refused",
    }


def test_a_real_run_with_the_network_cut_still_fails_in_one_line(network_cut: str) -> None:
    """Only a dry run takes placeholders: a run needs the media."""
    result = in_process(["audio", "-m", "whisper"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"mmrun: error: download of {network_cut}/mary_had_lamb.ogg failed: "
        "[Errno 111] Connection refused (check the network and the URL)"
    ]
