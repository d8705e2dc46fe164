"""The model repositories' files vendored under tests/fixtures/remote (the real remote classes
that tests/tiny/public.py and tests/tiny/public_more.py put into tiny checkpoints): each folder
says where its files come from and under which licence, and names every file it holds; the
checkpoints built with them load those files as remote code, as a Hub checkpoint's are loaded
with --trust-remote-code."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.tiny.public_more import REMOTE, build_eagle2_5, build_skywork_chat

FOLDERS = sorted(p for p in REMOTE.iterdir() if p.is_dir())


def test_there_are_vendored_folders() -> None:
    assert FOLDERS


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_each_folder_names_its_source_licence_and_files(folder: Path) -> None:
    readme = (folder / "README.md").read_text()
    assert re.search(r"(Source|Repository): https://github\.com/\S+", readme), folder.name
    assert re.search(r"[Cc]ommit:?\s+`?[0-9a-f]{7,40}", readme), folder.name
    assert re.search(r"Licence: \S+", readme), folder.name
    for path in folder.iterdir():
        if path.name != "README.md":
            assert path.name in readme, f"{folder.name}/README.md does not name {path.name}"


@pytest.mark.parametrize(
    ("build", "class_name"),
    [(build_eagle2_5, "Eagle2_5_VLConfig"), (build_skywork_chat, "SkyworkR1VChatConfig")],
    ids=["eagle2_5", "skywork_chat"],
)
def test_the_checkpoint_loads_the_vendored_config_class(
    build: Callable[[Path], TinyCheckpoint], class_name: str, tmp_path: Path
) -> None:
    from transformers import AutoConfig

    checkpoint = build(tmp_path / "ckpt")
    auto_map = json.loads((Path(checkpoint.path) / "config.json").read_text())["auto_map"]
    assert auto_map["AutoConfig"].endswith("." + class_name)
    config = AutoConfig.from_pretrained(str(checkpoint.path), trust_remote_code=True)
    # The class comes from the file copied into the checkpoint, not from transformers or vLLM.
    assert type(config).__name__ == class_name
    assert type(config).__module__.startswith("transformers_modules.")
    # What vLLM's InternVL-style processors read from it.
    assert config.min_dynamic_patch == 1 and config.max_dynamic_patch == 6
    assert config.text_config.hidden_size == 128
