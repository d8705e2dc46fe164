"""A --server run's template renderer remembers its answers per checkpoint (mmrun.templates):
a second renderer of the same checkpoint answers without asking the real one, a changed
file or another transformers version asks again, and failures are not remembered."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mmrun.errors import MediaError
from mmrun.templates import RememberedRenderer, checkpoint_fingerprint

MESSAGES = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi?"}]}]


class Counting:
    """A renderer that counts what it was asked."""

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[Any] = []
        self.fail = fail

    def render(
        self, messages: Sequence[Any], *, source: str, chat_template: str | None = None
    ) -> str:
        self.asked.append(("render", source, chat_template))
        if self.fail:
            raise MediaError("no usable chat template", hint="x")
        return f"<{source}>{messages[-1]['content'][-1]['text']}|{chat_template}"

    def token_id(self, token: str) -> int:
        self.asked.append(("token_id", token))
        return len(token)

    def eos_token_id(self) -> int:
        self.asked.append(("eos",))
        return 7


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_second_renderer_answers_without_asking(checkpoint: Path) -> None:
    first = Counting()
    memo = RememberedRenderer(first, str(checkpoint))
    assert memo.render(MESSAGES, source="processor") == "<processor>Hi?|None"
    assert memo.render(MESSAGES, source="tokenizer", chat_template="T") == "<tokenizer>Hi?|T"
    assert (memo.token_id("<|im_end|>"), memo.eos_token_id()) == (10, 7)
    assert len(first.asked) == 4

    second = Counting()
    again = RememberedRenderer(second, str(checkpoint))
    assert again.render(MESSAGES, source="processor") == "<processor>Hi?|None"
    assert again.render(MESSAGES, source="tokenizer", chat_template="T") == "<tokenizer>Hi?|T"
    assert (again.token_id("<|im_end|>"), again.eos_token_id()) == (10, 7)
    assert second.asked == []
    other = [{"role": "user", "content": [{"type": "text", "text": "Other?"}]}]
    assert again.render(other, source="processor") == "<processor>Other?|None"
    assert second.asked == [("render", "processor", None)]


def test_a_changed_template_file_or_transformers_asks_again(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    RememberedRenderer(Counting(), str(checkpoint)).render(MESSAGES, source="processor")
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(b"other weights")  # no template reads them
    unchanged = Counting()
    RememberedRenderer(unchanged, str(checkpoint)).render(MESSAGES, source="processor")
    assert unchanged.asked == []

    template = checkpoint / "chat_template.jinja"
    template.write_text("{{ messages }}!")
    os.utime(template, ns=(1, 1))
    changed = Counting()
    RememberedRenderer(changed, str(checkpoint)).render(MESSAGES, source="processor")
    assert changed.asked == [("render", "processor", None)]

    monkeypatch.setattr("mmrun.templates._package_version", lambda name: "0.0.1")
    upgraded = Counting()
    RememberedRenderer(upgraded, str(checkpoint)).render(MESSAGES, source="processor")
    assert upgraded.asked == [("render", "processor", None)]


def test_a_failure_is_not_remembered(checkpoint: Path) -> None:
    with pytest.raises(MediaError):
        RememberedRenderer(Counting(fail=True), str(checkpoint)).render(
            MESSAGES, source="processor"
        )
    later = Counting()
    assert RememberedRenderer(later, str(checkpoint)).render(MESSAGES, source="processor")
    assert later.asked == [("render", "processor", None)]


def test_a_model_not_at_hand_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert checkpoint_fingerprint("Org/not-downloaded") is None
    inner = Counting()
    memo = RememberedRenderer(inner, "Org/not-downloaded")
    memo.render(MESSAGES, source="processor")
    memo.render(MESSAGES, source="processor")  # remembered within the run still
    assert len(inner.asked) == 1
    assert not (tmp_path / "cache" / "templates").exists()


def test_a_hub_snapshot_is_named_by_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "hub"
    repo = hub / "models--Org--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert checkpoint_fingerprint("Org/tiny") is None  # the ref names no snapshot yet
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    assert checkpoint_fingerprint("Org/tiny") == "hub:Org/tiny@abc123"


def test_an_unwritable_cache_still_answers(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("MMRUN_CACHE_DIR", str(blocker))
    memo = RememberedRenderer(Counting(), str(checkpoint))
    assert memo.render(MESSAGES, source="processor") == "<processor>Hi?|None"


def test_a_line_cut_short_is_skipped_and_a_long_file_is_rewritten(
    checkpoint: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo = RememberedRenderer(Counting(), str(checkpoint))
    memo.render(MESSAGES, source="processor")
    (path,) = (isolated_cache / "templates").iterdir()
    with path.open("a") as file:
        file.write('["render", "cut')  # a run killed as it wrote
    again = Counting()
    assert RememberedRenderer(again, str(checkpoint)).render(MESSAGES, source="processor")
    assert again.asked == []

    monkeypatch.setattr("mmrun.templates._MAX_RENDERS", 2)
    many = RememberedRenderer(Counting(), str(checkpoint))
    for i in range(6):
        asked = [{"role": "user", "content": [{"type": "text", "text": f"q{i}"}]}]
        many.render(asked, source="processor")
    assert len(path.read_text().splitlines()) == 8  # appended: 1, 1 cut short, 6
    RememberedRenderer(Counting(), str(checkpoint))  # reads it, rewrites the newest two
    kept = [json.loads(line)[2] for line in path.read_text().splitlines()]
    assert kept == ["<processor>q4|None", "<processor>q5|None"]
