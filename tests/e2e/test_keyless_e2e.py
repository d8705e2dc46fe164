"""A checkpoint given with --model and no -m, through the real CLI and the real vLLM engine,
offline, on the tiny Qwen2.5-VL: its config.json names the architecture of qwen2_5_vl, which
runs it; with -m auto, it runs with its own chat template and the engine arguments vLLM
infers. Both give the greedy texts of ``-m qwen2_5_vl --method chat``: the same conversation,
rendered by vLLM with the same template.

The three runs share one engine in the CLI worker (tests/e2e/cli_worker.py): the tiny
checkpoint's engine arguments, given on each command line, make their engine arguments equal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mmrun.registry import GENERIC_KEY
from tests.e2e.cli_worker import CliRun, CliWorker

pytestmark = pytest.mark.e2e


def run(worker: CliWorker, *args: str) -> tuple[dict[str, Any], CliRun]:
    env = {name: value for name, value in os.environ.items() if name.startswith(("MMRUN_", "HF_"))}
    env["HF_HUB_OFFLINE"] = "1"
    result = worker.run(list(args), env)
    assert result.returncode == 0, result.stderr[-3000:]
    # Finite logits: tokens generated from NaN logits (id 0 on the CPU sampler) prove nothing.
    assert result.logits_batches and result.nan_logits_batches == 0
    return json.loads(result.stdout), result


def test_a_checkpoint_without_m_runs_as_its_key_or_with_its_own_template(
    tiny_checkpoint: Any, cli_worker: CliWorker, tmp_path: Path
) -> None:
    from PIL import Image

    checkpoint = tiny_checkpoint("image", "qwen2_5_vl")
    folder = str(checkpoint.path)
    # 56 x 56: a size that qwen2_5_vl's own resize (to multiples of 28) leaves as it is, so
    # that the keyed row and the checkpoint's own path send vLLM the same pixels.
    image = tmp_path / "red.png"
    Image.new("RGB", (56, 56), (200, 30, 30)).save(image)
    engine = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()]
    common = [
        "image",
        "--model",
        folder,
        "-i",
        str(image),
        "--num-prompts",
        "2",
        "--max-tokens",
        "8",
        "--json",
        "--engine-arg",
        "enforce_eager=true",
        "-tp",
        "1",
        *engine,
    ]
    try:
        keyed, _ = run(cli_worker, *common, "-m", "qwen2_5_vl", "--method", "chat")
        found, found_run = run(cli_worker, *common, "--method", "chat")
        own, own_run = run(cli_worker, *common, "-m", GENERIC_KEY)
    finally:
        cli_worker.release()

    choice = f"--model {folder} is a Qwen2_5_VLForConditionalGeneration: using -m qwen2_5_vl"
    assert (found["model"]["key"], found["model"]["choice"]) == ("qwen2_5_vl", choice)
    assert f"mmrun: {choice}" in found_run.stderr.splitlines()
    assert (own["model"]["key"], own["method"]) == (GENERIC_KEY, "chat")
    assert own["model"]["choice"].startswith(f"-m {GENERIC_KEY}: {folder} (a Qwen2_5_VL")
    assert own["model"]["choice"] in own_run.stderr
    # Only the model, its media limit, the seed and the command line's own engine arguments.
    given = {"tensor_parallel_size", "enforce_eager", *checkpoint.engine_args}
    assert set(own["request"]["engine_args"]) == {"model", "limit_mm_per_prompt", "seed", *given}

    def answers(doc: dict[str, Any]) -> list[tuple[str, int, int]]:
        return [(o["text"], o["prompt_tokens"], o["completion_tokens"]) for o in doc["outputs"]]

    assert all(o["completion_tokens"] > 0 for o in keyed["outputs"])
    assert answers(found) == answers(keyed)
    assert answers(own) == answers(keyed)


def test_a_clip_or_a_recording_with_a_checkpoint_and_no_m(
    tiny_checkpoint: Any, cli_worker: CliWorker, tmp_path: Path
) -> None:
    """The video and audio commands find the key as the image command does: a clip on the tiny
    Qwen2.5-VL (its own template with -m auto too, greedy texts equal to the keyed chat run),
    and a recording on the tiny Qwen2-Audio (a generate-only row: the key found gives the keyed
    run's texts; -m auto runs it by chat with its own template)."""
    import soundfile

    from tests.helpers.media import write_clip
    from tests.helpers.published import speech

    video = tiny_checkpoint("video", "qwen2_5_vl")
    clip = write_clip(tmp_path / "clip.mp4")
    audio = tiny_checkpoint("audio", "qwen2_audio")
    wav = tmp_path / "hello.wav"
    soundfile.write(wav, speech("hello there"), 16000)

    def common(modality: str, checkpoint: Any, *media: str) -> list[str]:
        engine = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()]
        return [
            modality, "--model", str(checkpoint.path), *media, "--num-prompts", "2",
            "--max-tokens", "8", "--json", "--engine-arg", "enforce_eager=true", "-tp", "1",
            *engine,
        ]  # fmt: skip

    clips = common("video", video, "--video", str(clip), "--num-frames", "8")
    recordings = common("audio", audio, "--audio", str(wav))
    try:
        keyed_clip, _ = run(cli_worker, *clips, "-m", "qwen2_5_vl", "--method", "chat")
        found_clip, _ = run(cli_worker, *clips, "--method", "chat")
        own_clip, _ = run(cli_worker, *clips, "-m", GENERIC_KEY)
        cli_worker.release()
        keyed_audio, _ = run(cli_worker, *recordings, "-m", "qwen2_audio")
        found_audio, found_run = run(cli_worker, *recordings)
        cli_worker.release()
        own_audio, _ = run(cli_worker, *recordings, "-m", GENERIC_KEY)
    finally:
        cli_worker.release()

    def answers(doc: dict[str, Any]) -> list[tuple[str, int, int]]:
        return [(o["text"], o["prompt_tokens"], o["completion_tokens"]) for o in doc["outputs"]]

    assert found_clip["model"]["key"] == "qwen2_5_vl" and found_clip["modality"] == "video"
    assert (own_clip["model"]["key"], own_clip["method"]) == (GENERIC_KEY, "chat")
    assert all(o["completion_tokens"] > 0 for o in keyed_clip["outputs"])
    assert answers(found_clip) == answers(keyed_clip)
    assert answers(own_clip) == answers(keyed_clip)

    choice = f"--model {audio.path} is a Qwen2AudioForConditionalGeneration: using -m qwen2_audio"
    assert (found_audio["model"]["key"], found_audio["model"]["choice"]) == ("qwen2_audio", choice)
    assert f"mmrun: {choice}" in found_run.stderr.splitlines()
    assert all(o["completion_tokens"] > 0 for o in keyed_audio["outputs"])
    assert answers(found_audio) == answers(keyed_audio)
    # No audio row runs by chat: the checkpoint's own template renders the conversation, and
    # vLLM expands its audio into more prompt tokens than the keyed prompt's text has.
    assert (own_audio["model"]["key"], own_audio["method"]) == (GENERIC_KEY, "chat")
    assert all(o["completion_tokens"] > 0 for o in own_audio["outputs"])
    assert min(o["prompt_tokens"] for o in own_audio["outputs"]) > 30
