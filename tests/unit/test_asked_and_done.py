"""What a run does with what the user asked for, where the two could differ unseen: a key or a
missing path given to --model, --limit and --shard over a folder or pattern, a blank answer,
more video frames than the method takes, a question the model does not read. Each is refused
in one line before anything starts, or done and said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import EXIT_USAGE
from tests.helpers.cli import Result, in_process
from tests.helpers.http import PNG
from tests.helpers.media import write_clip

ENV = {"NO_COLOR": "1", "COLUMNS": "100"}


def cli(*args: str) -> Result:
    return in_process(list(args), env=ENV)


def refused(result: Result) -> str:
    """The one error line of a run refused with exit 2 before anything started."""
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("d.png", "a.png", "c.png", "b.png", "e.png"):
        (folder / name).write_bytes(PNG)
    return folder


# --- --model: a key, or a path that is not there --------------------------------------------


@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_a_key_given_to_model_is_refused(photos: Path, dry: list[str]) -> None:
    image = str(photos / "a.png")
    line = refused(cli("image", "--model", "qwen2_5_vl", "-i", image, *dry))
    assert line == (
        "mmrun: error: --model 'qwen2_5_vl' is an mmrun key, not a checkpoint (use -m qwen2_5_vl)"
    )


def test_a_key_of_another_command_names_that_command(photos: Path) -> None:
    line = refused(cli("image", "--model", "whisper", "-i", str(photos / "a.png"), "--dry-run"))
    assert line == (
        "mmrun: error: --model 'whisper' is an mmrun key, not a checkpoint "
        "(use mmrun audio -m whisper)"
    )


def test_the_placeholder_name_of_a_row_without_a_public_checkpoint_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no folder named funaudiochat here
    line = refused(cli("audio", "-m", "funaudiochat", "--model", "funaudiochat", "--dry-run"))
    assert line == (
        "mmrun: error: --model funaudiochat: no such folder here, and funaudiochat has no "
        "public checkpoint (give --model the checkpoint's local folder or its Hugging Face "
        "repo id)"
    )


def test_a_local_folder_named_like_a_key_is_a_checkpoint(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mistral3").mkdir()
    monkeypatch.chdir(tmp_path)
    result = cli(
        "image", "-m", "mistral3", "--model", "mistral3", "-i", "photos/a.png", "--dry-run"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"mistral3 ({tmp_path / 'mistral3'}) · image · generate"


@pytest.mark.parametrize("path", ["./ckpt", "../nowhere/ckpt", "/no/such/ckpt", "~/no-such-ckpt"])
@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_a_model_path_that_is_not_there_is_refused(photos: Path, path: str, dry: list[str]) -> None:
    line = refused(
        cli("image", "-m", "mistral3", "--model", path, "-i", str(photos / "a.png"), *dry)
    )
    assert line == (
        f"mmrun: error: --model {path}: no such file or folder "
        "(check the path, or give a Hugging Face repo id, ORG/NAME)"
    )


def test_a_hub_repo_id_passes_the_check(photos: Path) -> None:
    result = cli(
        "image", "-m", "mistral3", "--model", "acme/ckpt", "-i", str(photos / "a.png"), "--dry-run"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "mistral3 (acme/ckpt) · image · generate"


# --- --limit and --shard over a folder or a pattern ------------------------------------------


def _ids(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [json.loads(line)["id"] for line in result.stdout.splitlines()]


def _rows(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("pattern", [False, True])
def test_limit_and_shard_take_a_folders_files_in_sorted_order(photos: Path, pattern: bool) -> None:
    source = str(photos / "*.png") if pattern else str(photos)
    run = ("image", "-m", "mistral3", "-i", source, "--dry-run", "--json")
    names = [str(photos / f"{c}.png") for c in "abcde"]
    assert sorted(_ids(cli(*run, "--limit", "2"))) == names[:2]
    shards = [sorted(_ids(cli(*run, "--shard", f"{k}/2"))) for k in range(2)]
    assert shards == [[names[0], names[2], names[4]], [names[1], names[3]]]
    rows = _rows(cli(*run, "--shard", "1/2", "--limit", "1"))
    # A prompt keeps its id and its place in the whole folder.
    assert [(r["id"], r["index"]) for r in rows] == [(names[1], 1)]


def test_a_shard_with_no_prompt_of_a_folder_is_refused(photos: Path) -> None:
    line = refused(cli("image", "-m", "mistral3", "-i", str(photos), "--shard", "5/6", "--dry-run"))
    assert line == "mmrun: error: --shard 5/6 takes none of the 5 prompts (use at most 5 shards)"


def test_a_bad_shard_of_a_folder_is_refused(photos: Path) -> None:
    line = refused(cli("image", "-m", "mistral3", "-i", str(photos), "--shard", "2/2", "--dry-run"))
    assert (
        line == "mmrun: error: invalid --shard '2/2' (write I/N with 0 <= I < N, e.g. --shard 0/4)"
    )


def test_table_options_without_input_are_still_refused(photos: Path) -> None:
    line = refused(
        cli("image", "-m", "mistral3", "-i", str(photos), "--columns", "image=img", "--dry-run")
    )
    assert line == (
        "mmrun: error: --input-format, --columns, --keep-columns, --split, --dataset-config, "
        "--revision, --question-template and --media-root are for --input "
        "(add --input FILE, or drop them)"
    )


def test_a_limited_folder_run_writes_only_its_prompts(
    fake_vllm: Any, photos: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    run = ("image", "-m", "mistral3", "-i", str(photos), "-o", str(out), "--quiet")
    assert cli(*run, "--limit", "3").exit_code == 0
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == [
        str(photos / f"{c}.png") for c in "abc"
    ]


# --- blank answers ---------------------------------------------------------------------------


def test_a_blank_answer_shows_as_such_on_the_terminal(fake_vllm: Any, photos: Path) -> None:
    result = cli("image", "-m", "mistral3", "-i", str(photos / "a.png"), "-q", "BLANK")
    assert result.exit_code == 0, result.output
    assert "│ (empty answer)" in result.stdout


def test_a_blank_answer_of_a_batch_shows_as_such(fake_vllm: Any, photos: Path) -> None:
    result = cli("image", "-m", "mistral3", "-i", str(photos), "--limit", "1", "-q", "EMPTY")
    assert result.exit_code == 0, result.output
    assert "│ (empty answer)" in result.stdout


def test_json_keeps_a_blank_answer_with_its_finish_reason(fake_vllm: Any, photos: Path) -> None:
    image = str(photos / "a.png")
    result = cli("image", "-m", "mistral3", "-i", image, "-q", "EMPTY", "--json")
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)["outputs"][0]
    assert (output["text"], output["finish_reason"]) == ("", "length")
    rows = _rows(cli("image", "-m", "mistral3", "-i", str(photos), "-q", "BLANK", "--json"))
    assert {(r["text"], r["finish_reason"]) for r in rows} == {(" \n", "length")}


# --- video frames: what the method takes, what the clip has ----------------------------------


def test_more_frames_than_a_chat_request_takes_are_lowered_with_a_note(tmp_path: Path) -> None:
    clip = str(write_clip(tmp_path / "clip.mp4", frames=40))
    run = ("video", "-m", "qwen2_5_vl", "--video", clip, "--num-frames", "100", "--dry-run")
    result = cli(*run, "--method", "chat", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "mmrun: --num-frames 100 is more than --method chat takes: using 32 (vLLM's video "
        "loader reads at most 32 frames of a clip in a chat request; --method generate takes "
        "them all)"
    ]
    document = json.loads(result.stdout)
    assert document["request"]["modality_options"]["num_frames"] == 32
    assert document["media"][0]["sampled_frames"] == 32
    generate = cli(*run, "--json")
    assert generate.exit_code == 0 and generate.stderr == ""
    assert json.loads(generate.stdout)["media"][0]["sampled_frames"] == 40


def test_a_clip_shorter_than_num_frames_says_it_gave_all_it_has(tmp_path: Path) -> None:
    clip = str(write_clip(tmp_path / "clip.mp4", frames=16))
    run = ("video", "-m", "qwen2_5_vl", "--video", clip, "--dry-run")
    result = cli(*run, "--num-frames", "100")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[2] == (
        f"media: {clip} 16 frames, 2.0s; 16 sampled at 64x48 (all it has, of --num-frames 100)"
    )
    assert cli(*run).stdout.splitlines()[2] == f"media: {clip} 16 frames, 2.0s; 16 sampled at 64x48"
    media = json.loads(cli(*run, "--num-frames", "100", "--json").stdout)["media"][0]
    assert (media["sampled_frames"], media["num_frames"]) == (16, 100)


# --- a model that reads no question ----------------------------------------------------------


def test_whispers_dry_run_shows_it_takes_no_question(tmp_path: Path) -> None:
    import numpy as np
    import soundfile

    clip = tmp_path / "a.wav"
    soundfile.write(clip, np.zeros(16000, dtype=np.float32), 16000)
    result = cli("audio", "-m", "whisper", "-a", str(clip), "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == "question: none (whisper takes no question)"
    assert result.stderr == ""
    asked = cli("audio", "-m", "whisper", "-a", str(clip), "--dry-run", "-q", "Who speaks?")
    assert asked.exit_code == 0, asked.output
    assert asked.stderr.splitlines() == ["mmrun: whisper takes no question: -q is not read"]
    assert asked.stdout.splitlines()[1] == "question: none (whisper takes no question)"
    quiet = cli("audio", "-m", "whisper", "-a", str(clip), "--dry-run", "-q", "x", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == ""
