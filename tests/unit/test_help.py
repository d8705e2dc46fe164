"""The help as a new user reads it at 80 columns: no type names in place of metavars, a
modality command's help within a terminal and a half, the rest behind --help-all."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

COMMANDS = ["", "image", "audio", "video", "models", "plugins", "selftest", "report", "score"]
COMMANDS += ["compare", "export"]


def help_text(*args: str, terminal: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "80"
    if terminal:
        env["FORCE_COLOR"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "mmrun", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)


@pytest.mark.parametrize("command", COMMANDS)
def test_no_type_names_as_metavars(command: str) -> None:
    text = help_text(*filter(None, [command]), "--help-all")
    assert re.findall(r"<[a-z][a-z \[\]]*>", text) == []


@pytest.mark.parametrize("modality", ["image", "audio", "video"])
def test_a_modality_help_fits_110_lines_at_80_columns(modality: str) -> None:
    lines = help_text(modality, "--help").splitlines()
    assert len(lines) <= 110, len(lines)
    assert f" More options: mmrun {modality} --help-all (data sets, structured answers, Ray)" in [
        line.rstrip() for line in lines
    ]
    names = set(re.findall(r"--[a-z][a-z-]*", "\n".join(lines)))
    assert {"--model-type", "--question", "--output", "--input", "--dry-run", "--json"} <= names
    assert not {"--shard", "--json-schema", "--replicas", "--warmup"} & names


def test_help_all_shows_every_option() -> None:
    text = help_text("image", "--help-all")
    for line in (
        "│ --json-schema                    SCHEMA      Answer JSON matching this JSON  │",
        "│ --choice                         TEXT        Answer one of these strings     │",
        "│ --json-object                                Answer any JSON value; results  │",
        "│ --help                  -h                   Show this message and exit.     │",
    ):
        assert line in text.splitlines()
    assert "--shard" in text and "--replicas" in text


def test_the_root_help_names_every_modality() -> None:
    text = help_text("--help")
    assert "Run vision-, audio- and video-language models on images, audio and video" in text
    commands = [line.split()[1] for line in text.splitlines() if re.match(r"│ [a-z]+ ", line)]
    assert commands[:3] == ["image", "audio", "video"]
