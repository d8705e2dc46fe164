"""Every ```python snippet of docs/python.md and README.md runs as printed, on the stand-in
vLLM, in a folder that holds the files the snippets name (made here: photos, a recording,
video frames). A key whose prompt its checkpoint's processor renders would need the Hub:
its ``mmrun.Model`` and ``mmrun.request_for`` calls get the tiny checkpoint that ``mmrun
selftest`` builds as their ``model=`` (the documented way to run a key on another checkpoint),
and nothing else of the snippet changes.

What a snippet shows it prints is checked: a line ``print(X)  # -> Y`` prints ``Y``, and a
```text block right after a snippet is all that the snippet prints. A model's answer (an ``X``
that ends in ``.text`` or ``.parsed``) is the model's own: of it, the type is checked, and the
keys of a dict (the stand-in answers "x" for each field a JSON schema requires)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import in_process

ROOT = Path(__file__).resolve().parents[2]
# The python snippets each page holds: a new one fails here until it is counted (and then it
# runs below like the others).
COUNTS = {"docs/python.md": 9, "README.md": 0}
_CHECKED = re.compile(r"^(?P<indent>\s*)print\((?P<expr>.*)\)\s+# -> (?P<shown>.*)$")


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int  # of its first line of code, from 1
    code: str
    output: str | None  # the ```text block right after it, if any

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(page: str, text: str | None = None) -> list[Snippet]:
    """A page's python snippets (``text``: the page's text, else its file's)."""
    lines = (ROOT / page).read_text().splitlines() if text is None else text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```python":
            i += 1
            continue
        start = i + 1
        end = lines.index("```", start)
        after = end + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        output = None
        if after < len(lines) and lines[after].strip() == "```text":
            close = lines.index("```", after + 1)
            output = "\n".join(lines[after + 1 : close]) + "\n"
            end = close
        code = "\n".join(lines[start : lines.index("```", start)]) + "\n"
        found.append(Snippet(page, start + 1, code, output))
        i = end + 1
    return found


ALL = [s for page in COUNTS for s in snippets(page)]


def test_every_snippet_is_counted() -> None:
    assert {page: len(snippets(page)) for page in COUNTS} == COUNTS
    for page in COUNTS:  # none hides from the count behind another spelling of its fence
        fences = [line.strip() for line in (ROOT / page).read_text().splitlines()]
        odd = [f for f in fences if f.lower().startswith("```py") and f != "```python"]
        assert odd == [], page


def test_a_snippet_and_the_output_it_shows() -> None:
    page = "x\n```python\nprint(1)\n```\n\n```text\n1\n```\n```python\na = 2\n```\n"
    assert snippets("page.md", page) == [
        Snippet("page.md", 3, "print(1)\n", "1\n"),
        Snippet("page.md", 10, "a = 2\n", None),
    ]


@dataclass
class Checks:
    """The values of the lines that show what they print."""

    shown: dict[int, tuple[str, str]] = field(default_factory=dict)  # line: (expr, shown)
    seen: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def record(self, line: int, *values: Any) -> None:
        self.seen[line] = values
        print(*values)


def instrumented(code: str) -> tuple[str, Checks]:
    """The snippet with each ``print(X)  # -> Y`` line recording X (and still printing it)."""
    checks = Checks()
    out = []
    for number, text in enumerate(code.splitlines(), 1):
        match = _CHECKED.match(text)
        if match:
            checks.shown[number] = (match["expr"], match["shown"].strip())
            text = f"{match['indent']}__check__({number}, {match['expr']})"
        out.append(text)
    return "\n".join(out) + "\n", checks


def _answer(expr: str) -> bool:
    return expr.endswith((".text", ".parsed"))


def _same_shape(shown: str, value: Any) -> bool:
    """Whether a model's answer is of the kind the page shows: text as text (a printed str
    has no quotes), a dict with the same keys, a value of the same type."""
    try:
        literal = ast.literal_eval(shown)
    except (SyntaxError, ValueError):
        literal = shown  # text, as print shows it
    if isinstance(literal, dict):
        return isinstance(value, dict) and set(value) == set(literal)
    return type(value) is type(literal)


def check_output(snippet: Snippet, checks: Checks, printed: str) -> None:
    assert set(checks.seen) == set(checks.shown), "a checked line did not run"
    for line, (expr, shown) in checks.shown.items():
        values = checks.seen[line]
        where = f"{snippet.page}, line {snippet.line + line - 1}: print({expr})"
        if _answer(expr):
            assert len(values) == 1, where
            assert _same_shape(shown, values[0]), (where, values)
        else:
            assert " ".join(str(v) for v in values) == shown, where
    if snippet.output is not None:
        assert printed == snippet.output, snippet.name


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The files the snippets name, in the working folder."""
    import numpy as np
    import soundfile
    from PIL import Image

    Image.new("RGB", (64, 48), (200, 120, 40)).save(tmp_path / "photo.jpg")
    Image.new("RGB", (48, 64), (90, 90, 90)).save(tmp_path / "cat.jpg")
    (tmp_path / "photos").mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (i * 80, 40, 40)).save(tmp_path / "photos" / f"p{i}.jpg")
    tone = 0.1 * np.sin(np.linspace(0, 2000, 16000)).astype(np.float32)
    soundfile.write(tmp_path / "speech.wav", tone, 16000)
    (tmp_path / "frames").mkdir()
    for i in range(8):
        frame = Image.new("RGB", (64, 48), (30, 30 * i, 90))
        frame.save(tmp_path / "frames" / f"{i:03d}.png")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def replicas_import_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snippet's replica processes (``data_parallel_size``) start with this process's
    ``sys.path``: the stand-in vLLM is what they import."""
    from tests.helpers.stand_in import FAKE_VLLM

    monkeypatch.syspath_prepend(str(FAKE_VLLM))


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> str:
    from mmrun.tiny.qwen_vl import build_qwen2_5_vl

    return str(build_qwen2_5_vl(tmp_path_factory.mktemp("qwen")).path)


@pytest.fixture
def no_hub(tiny_qwen: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The snippets' calls of a key that needs its Hub checkpoint get the tiny one as
    ``model=``; the checkpoint of each such key."""
    import mmrun

    tiny = {"qwen2_5_vl": tiny_qwen}
    real_model, real_request = mmrun.Model, mmrun.request_for

    def offline(key: str, options: dict[str, Any]) -> dict[str, Any]:
        return {"model": tiny[key], **options} if key in tiny else options

    class Model(real_model):  # type: ignore[misc, valid-type]
        def __init__(self, key: str, **options: Any) -> None:
            super().__init__(key, **offline(key, options))

    def request_for(key: str, *args: Any, **options: Any) -> Any:
        return real_request(key, *args, **offline(key, options))

    monkeypatch.setattr(mmrun, "Model", Model)
    monkeypatch.setattr(mmrun, "request_for", request_for)
    return tiny


def _rows_have_the_command_lines_columns(
    namespace: dict[str, Any], folder: Path, tiny: dict[str, str]
) -> None:
    """The page says a snippet's rows are the command line's lines of that folder."""
    command = ["image", "-m", "qwen2_5_vl", "--model", tiny["qwen2_5_vl"], "-i", "photos"]
    cli = in_process([*command, "-o", "out.jsonl"])
    assert cli.exit_code == 0, cli.stderr
    lines = [json.loads(line) for line in (folder / "out.jsonl").read_text().splitlines()]
    rows = namespace["rows"]
    assert [sorted(row) for row in rows] == [sorted(line) for line in lines]
    assert sorted(row["id"] for row in rows) == sorted(line["id"] for line in lines)


# What the page says of a snippet's results beyond what it prints, by a line of the snippet.
CLAIMS: dict[str, Callable[[dict[str, Any], Path, dict[str, str]], None]] = {
    "rows = [result.to_dict() for result in model.run(photos)]": (
        _rows_have_the_command_lines_columns
    ),
}


def test_every_claim_belongs_to_a_snippet() -> None:
    for line in CLAIMS:
        assert any(line in s.code for s in ALL), line


@pytest.mark.parametrize("snippet", ALL, ids=[s.name for s in ALL])
def test_the_snippet_runs_and_prints_what_it_shows(
    snippet: Snippet,
    fake_vllm: Any,
    replicas_import_the_stand_in: None,
    no_hub: dict[str, str],
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, checks = instrumented(snippet.code)
    namespace: dict[str, Any] = {"__name__": "__snippet__", "__check__": checks.record}
    capsys.readouterr()
    exec(compile(code, snippet.name, "exec"), namespace)
    printed = capsys.readouterr().out
    check_output(snippet, checks, printed)
    for line, claim in CLAIMS.items():
        if line in snippet.code:
            claim(namespace, sandbox, no_hub)
