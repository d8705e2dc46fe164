"""The video modality end to end: ``mmrun video -m qwen2_5_vl --video clip.mp4`` on the tiny
Qwen2.5-VL checkpoint (whose processor carries the real Qwen2-VL video processor), through the
real engine, by generate and by chat, on a clip generated here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.helpers.media import write_clip

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("key", "method"),
    [("qwen2_5_vl", "generate"), ("qwen2_5_vl", "chat"), ("qwen2_vl", "generate")],
)
def test_a_clip_through_the_real_engine(
    key: str, method: str, tiny_checkpoint: Callable[[str, str], TinyCheckpoint], tmp_path: Path
) -> None:
    checkpoint = tiny_checkpoint("video", key)
    clip = write_clip(tmp_path / "clip.mp4")
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mmrun",
            "video",
            "-m",
            "qwen2_5_vl",
            "--model",
            str(checkpoint.path),
            "--video",
            str(clip),
            "--method",
            method,
            "--max-tokens",
            "6",
            "-tp",
            "1",
            "--json",
            *flags,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["modality"] == "video"
    assert doc["media"][0]["frames"] == 16 and doc["media"][0]["duration_s"] == 2.0
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"] == {
        "image": 0,
        "video": 1,
        "audio": 0,
    }
    assert "<|video_pad|>" in doc["prompt"]
    (output,) = doc["outputs"]
    # vLLM's processor expanded the one <|video_pad|> into the clip's frame tokens.
    assert output["prompt_tokens"] > 40 and output["completion_tokens"] > 0
