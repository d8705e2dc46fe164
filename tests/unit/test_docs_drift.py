"""What the docs show, against what the program does: the README's quick-start dry runs run
offline as shown, the batch summary's rates for any input, media paths shown normalized."""

from __future__ import annotations

import json
import re
import shlex
import socket
from pathlib import Path

import pytest

from mmrun.cli.batch import throughput
from mmrun.outcome import Stats
from tests.helpers.cli import in_process

ROOT = Path(__file__).parents[2]


def dry_run_commands(markdown: Path) -> list[list[str]]:
    """Every `mmrun ... --dry-run` line of the file's console blocks, comment cut off."""
    commands = []
    for block in re.findall(r"```console\n(.*?)```", markdown.read_text(), re.S):
        for raw in block.splitlines():
            line = raw.removeprefix("$ ").split("  #")[0].strip()
            if line.startswith("mmrun ") and "--dry-run" in line and "|" not in line:
                commands.append(shlex.split(line)[1:])
    return commands


@pytest.fixture
def offline_here(isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the a.png and b.png the README names, the network cut."""
    from PIL import Image

    for name in ("a.png", "b.png"):
        Image.new("RGB", (64, 48), (200, 10, 10)).save(tmp_path / name)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv("MMRUN_ASSETS_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


QUICK_START = {
    "README.md": [
        ["image", "-m", "idefics3", "-i", "a.png", "-i", "b.png", "--dry-run"],
        ["video", "-m", "qwen2_5_vl", "--dry-run"],
    ],
    "docs/index.md": [["image", "-m", "idefics3", "-i", "a.png", "-i", "b.png", "--dry-run"]],
}


@pytest.mark.parametrize("doc", sorted(QUICK_START))
def test_the_quick_start_dry_runs_run_offline_as_shown(doc: str, offline_here: Path) -> None:
    commands = dry_run_commands(ROOT / doc)
    assert commands == QUICK_START[doc]  # a new one is added here, with what it shows
    for args in commands:
        result = in_process(args)
        assert result.exit_code == 0, result.stderr
        assert result.stderr == ""
        shown = SHOWN[args[0]]
        assert result.stdout.splitlines()[: len(shown)] == shown


SHOWN = {
    "image": [
        "idefics3 (HuggingFaceM4/Idefics3-8B-Llama3) · image · generate",
        "question: What is the content of each image?",
        "media: a.png 64x48",
        "media: b.png 64x48",
    ],
    "video": [
        "qwen2_5_vl (Qwen/Qwen2.5-VL-3B-Instruct) · video · generate",
        "question: Why is this video funny?",
        "media: bouncing_ball 32 frames, 4.0s; 16 sampled at 160x120",
    ],
}


def test_the_summary_gives_rates_however_short_the_run() -> None:
    """A manifest or table of a few prompts finishes in under a second once the engine is up:
    its summary gave the token counts without the rates."""
    stats = Stats(done=2, prompt_tokens=22, completion_tokens=4)
    assert throughput(stats, 0.5) == (
        "22 prompt + 4 output tokens, 4.00 prompts/s, 8.0 output tok/s over 0.5s after the "
        "engine start"
    )
    assert throughput(Stats(done=2), 0.5) == ""


def test_media_paths_of_a_manifest_are_shown_normalized(offline_here: Path) -> None:
    (offline_here / "lists").mkdir()
    manifest = offline_here / "lists" / "in.jsonl"
    manifest.write_text('{"id": "p", "image": "../a.png"}\n')
    result = in_process(
        ["image", "-m", "mistral3", "--input", str(manifest), "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["media"] == [str(offline_here / "a.png")]
