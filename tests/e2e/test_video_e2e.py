"""The video modality end to end: ``mmrun video -m KEY --video clip.mp4`` on the tiny
checkpoint of every proven video row (their processors carry the real video processors, or the
stand-ins tests/tiny names), through the real engine, by generate and by chat, on clips
generated here; an image with each clip (``--image``); and a long clip (half an hour) sampled
within a bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
from tests.helpers.media import write_clip

pytestmark = pytest.mark.e2e


@pytest.fixture
def worker(cli_worker: CliWorker) -> Iterator[CliWorker]:
    """The session's CLI worker (vLLM imported once); the engine a test started is stopped
    after it."""
    yield cli_worker
    cli_worker.release()


@pytest.mark.parametrize(
    ("key", "method"),
    [
        ("qwen2_5_vl", "generate"),
        ("qwen2_5_vl", "chat"),
        ("qwen2_vl", "generate"),
        ("qwen3_vl", "generate"),
        ("qwen3_vl_moe", "generate"),
        ("qwen3_5", "generate"),
        ("qwen3_5_moe", "generate"),
        ("gemma4", "generate"),
        ("qwen2_5_omni", "generate"),
        ("glm4_1v", "generate"),
        ("glm4_5v", "generate"),
        ("glm4_5v_fp8", "generate"),
        ("glm_ocr", "generate"),
        ("llava-onevision", "generate"),
        ("llava-next-video", "generate"),
        ("keye_vl", "generate"),
        ("keye_vl1_5", "generate"),
        ("ernie45_vl", "generate"),
        ("internvl_chat", "generate"),
        ("interns1", "generate"),
        ("ovis2_5", "generate"),
        ("exaone4_5", "generate"),
        ("molmo2", "generate"),
    ],
)
def test_a_clip_through_the_real_engine(
    key: str,
    method: str,
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    worker: CliWorker,
) -> None:
    checkpoint = tiny_checkpoint("video", key)
    clip = write_clip(tmp_path / "clip.mp4")
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    run = worker.run(
        [
            "video",
            "-m",
            key,
            "--model",
            str(checkpoint.path),
            "--video",
            str(clip),
            "--method",
            method,
            "--num-frames",
            "8",
            "--max-tokens",
            "6",
            "-tp",
            "1",
            "--json",
            # As the image rows run: a checkpoint may carry remote code (Keye-VL's, ERNIE-4.5-VL's).
            "--trust-remote-code",
            *flags,
        ],
        {"HF_HUB_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["modality"] == "video"
    assert doc["media"][0]["frames"] == 16 and doc["media"][0]["duration_s"] == 2.0
    assert doc["media"][0]["sampled_frames"] == 8
    assert doc["request"]["modality_options"] == {"num_frames": 8, "fps": None, "max_pixels": None}
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"] == {
        "image": 0,
        "video": 1,
        "audio": 0,
    }
    placeholder = {
        "glm4_1v": "<|video|>",
        "glm4_5v": "<|video|>",
        "glm4_5v_fp8": "<|video|>",
        "glm_ocr": "<|video|>",
        "gemma4": "<|video|>",
        "qwen2_5_omni": "<|VIDEO|>",
        "ernie45_vl": "<|video@placeholder|>",
        "internvl_chat": "<video>",
        "interns1": "<video>",
        "ovis2_5": "<video>",
        "exaone4_5": "<vision><|video_pad|></vision>",
        "molmo2": "<|video|>",
    }.get(key, "<video>" if key.startswith("llava") else "<|video_pad|>")
    assert doc["prompt"].count(placeholder) == 1
    (output,) = doc["outputs"]
    # vLLM's processor expanded the one placeholder into the sampled frames' tokens.
    assert output["prompt_tokens"] > 40 and output["completion_tokens"] > 0


def test_the_default_clip_through_the_real_engine(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], tmp_path: Path
) -> None:
    """``mmrun video -m KEY`` without --video: the clip mmrun draws, offline."""
    checkpoint = tiny_checkpoint("video", "qwen2_5_vl")
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    args = ["video", "-m", "qwen2_5_vl", "--model", str(checkpoint.path), "--num-frames", "8"]
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", *args, "--max-tokens", "6", "--json", *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "MMRUN_CACHE_DIR": str(tmp_path / "cache")},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    (media,) = doc["media"]
    assert media["source"] == "bouncing_ball" and media["path"].endswith("bouncing_ball.avi")
    assert (media["frames"], media["duration_s"], media["sampled_frames"]) == (32, 4.0, 8)
    (output,) = doc["outputs"]
    assert output["prompt_tokens"] > 40 and output["completion_tokens"] > 0


# A wrapper that runs mmrun and prints the peak resident memory of it and its children (the
# engine core included), in KiB: what a long clip must not raise.
_PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run([sys.executable, '-m', 'mmrun', *sys.argv[1:]]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code, file=sys.stderr)\n"
)


def _peak_rss(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        timeout=900,
    )
    peak, code = proc.stderr.strip().splitlines()[-1].split()
    assert code == "0", proc.stderr[-3000:]
    return int(peak), proc.stdout, proc.stderr


def test_a_half_hour_clip_is_sampled_in_bounded_memory(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], tmp_path: Path
) -> None:
    """Half an hour at 1 fps: only the sampled frames are decoded, by seeking, from the file
    itself (its size above the read cap proves it is never read whole), and the dry run's
    peak memory is that of a four-second clip's."""
    long_clip = write_clip(tmp_path / "long.mp4", frames=1800, fps=1)
    short_clip = write_clip(tmp_path / "short.mp4", frames=4, fps=1)
    # Below the long clip's size: a decoder that read the file whole would refuse it.
    cap = {"MMRUN_MAX_FILE_MB": str(long_clip.stat().st_size / 2 / 1024 / 1024)}
    flags = ["--num-frames", "8", "--dry-run", "--json"]
    peaks = {}
    for clip in (short_clip, long_clip):
        peaks[clip.name], out, _ = _peak_rss(["video", "--video", str(clip), *flags], cap)
        (media,) = json.loads(out)["media"]
        assert media["sampled_frames"] == (4 if clip is short_clip else 8)
    assert media["frames"] == 1800 and media["duration_s"] == 1800.0
    assert peaks["long.mp4"] - peaks["short.mp4"] < 32 * 1024, peaks

    # One engine run on the long clip: one frame every four minutes, through the real engine.
    checkpoint = tiny_checkpoint("video", "qwen2_5_vl")
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    engine_flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    peak, out, _ = _peak_rss(
        [
            "video",
            "-m",
            "qwen2_5_vl",
            "--model",
            str(checkpoint.path),
            "--video",
            str(long_clip),
            "--fps",
            str(1 / 240),
            "--max-tokens",
            "4",
            "-tp",
            "1",
            "--json",
            *engine_flags,
        ],
        cap,
    )
    doc = json.loads(out)
    assert doc["media"][0]["sampled_frames"] == 8
    assert doc["request"]["modality_options"]["fps"] == 1 / 240
    assert doc["outputs"][0]["completion_tokens"] > 0
    # The engine's own footprint (torch, vLLM, the KV cache) dominates; the clip adds little.
    assert peak < 4 * 1024 * 1024, f"peak RSS {peak} KiB"
    print(f"peak RSS: dry run {peaks}, engine run {peak} KiB")


def _image_tokens(checkpoint: TinyCheckpoint, image: Path) -> int:
    """The tokens the checkpoint's own (transformers) image processor gives an image."""
    from PIL import Image
    from transformers import AutoImageProcessor

    processor = AutoImageProcessor.from_pretrained(checkpoint.path)
    grid = processor(images=[Image.open(image)], return_tensors="np")["image_grid_thw"][0]
    return int(grid.prod()) // processor.merge_size**2


def test_a_clip_with_an_image_through_the_real_engine(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], tmp_path: Path, cli_worker: CliWorker
) -> None:
    """``mmrun video --image``: one image ahead of each clip (vLLM's "image+video"), on the
    tiny Qwen2.5-VL through the real engine, by generate, by chat and as a batch, on one engine
    (the runs share their engine arguments). A larger image adds exactly the tokens the
    model's own image processor gives it: the image reaches the model beside the clip."""
    from PIL import Image

    checkpoint = tiny_checkpoint("video", "qwen2_5_vl")
    clips = tmp_path / "clips"
    clips.mkdir()
    clip = write_clip(clips / "a.mp4")
    write_clip(clips / "b.mp4")
    small, large = tmp_path / "small.png", tmp_path / "large.png"
    Image.new("RGB", (56, 56), "red").save(small)
    Image.new("RGB", (112, 84), "blue").save(large)
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    common = [
        "video",
        "-m",
        "qwen2_5_vl",
        "--model",
        str(checkpoint.path),
        "--num-frames",
        "8",
        "--max-tokens",
        "4",
        "-tp",
        "1",
        *[f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()],
    ]
    env = {"HF_HUB_OFFLINE": "1"}
    try:
        docs = {}
        runs = [(image, method) for method in ("generate", "chat") for image in (small, large)]
        for image, method in runs:
            args = [*common, "--video", str(clip), "--image", str(image), "--method", method]
            run = cli_worker.run([*args, "--json"], env)
            assert run.returncode == 0, run.stderr[-3000:]
            docs[(image.name, method)] = json.loads(run.stdout)
        doc = docs[("small.png", "generate")]
        assert doc["request"]["engine_args"]["limit_mm_per_prompt"] == {
            "image": 1,
            "video": 1,
            "audio": 0,
        }
        assert doc["request"]["with_media"] == {"image": [str(small)]}
        assert doc["question"] == "What is shown in the image? What happens in the video?"
        assert doc["prompt"].count("<|image_pad|>") == doc["prompt"].count("<|video_pad|>") == 1
        tokens = {k: d["outputs"][0]["prompt_tokens"] for k, d in docs.items()}
        image_added = _image_tokens(checkpoint, large) - _image_tokens(checkpoint, small)
        for method in ("generate", "chat"):
            added = tokens[("large.png", method)] - tokens[("small.png", method)]
            assert added == image_added > 0, method
        assert docs[("large.png", "chat")]["outputs"][0]["completion_tokens"] > 0

        # A batch: both clips, each with the image, on the same engine.
        out = tmp_path / "out.jsonl"
        run = cli_worker.run(
            [*common, "--video", str(clips), "--image", str(small), "-o", str(out)], env
        )
        assert run.returncode == 0, run.stderr[-3000:]
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted(line["id"] for line in lines) == sorted(str(p) for p in clips.iterdir())
        assert all(line["prompt_tokens"] == tokens[("small.png", "generate")] for line in lines)
        assert run.reused, "the batch started an engine of its own"
    finally:
        cli_worker.release()


@pytest.mark.parametrize(
    ("key", "placeholders"),
    [
        ("glm4_1v", ("<|image|>", "<|video|>")),
        ("llava-onevision", ("<image>", "<video>")),
    ],
)
def test_an_image_and_a_clip_in_one_prompt_of_other_families(
    key: str,
    placeholders: tuple[str, str],
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path: Path,
    cli_worker: CliWorker,
) -> None:
    """The image+video prompt of two other families (their own placeholders and processors),
    through the real engine: vLLM finds each placeholder's item and expands both."""
    from PIL import Image

    checkpoint = tiny_checkpoint("video", key)
    clip = write_clip(tmp_path / "clip.mp4")
    image = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), "green").save(image)
    engine_args = {**checkpoint.engine_args, "enforce_eager": True}
    args = ["video", "-m", key, "--model", str(checkpoint.path), "--video", str(clip)]
    args += ["--image", str(image), "--num-frames", "8", "--max-tokens", "4", "-tp", "1"]
    args += ["--json", "--trust-remote-code"]
    args += [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    try:
        run = cli_worker.run(args, {"HF_HUB_OFFLINE": "1"})
    finally:
        cli_worker.release()
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert [doc["prompt"].count(p) for p in placeholders] == [1, 1]
    assert doc["request"]["engine_args"]["limit_mm_per_prompt"]["image"] == 1
    assert doc["outputs"][0]["completion_tokens"] > 0
