"""The CLI's one error boundary (mmrun.cli._errors): each exception a command line can end
with, its one line and its documented exit code; and that it is the only one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer

from mmrun.cli._errors import DEBUG_ENV, Ending, end, ending
from mmrun.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    EXIT_USAGE,
    EngineError,
    MediaError,
    MmrunError,
    UsageError,
)
from tests.helpers.cli import in_process

MMRUN = Path(__file__).resolve().parents[2] / "mmrun"


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            UsageError("bad -n", hint="use -n 1"),
            Ending("mmrun: error: bad -n (use -n 1)", EXIT_USAGE, traceback=True),
        ),
        (MediaError("a.png is empty"), Ending("mmrun: error: a.png is empty", EXIT_USAGE, True)),
        (EngineError("out of memory"), Ending("mmrun: error: out of memory", EXIT_FAILURE, True)),
        (MmrunError("failed"), Ending("mmrun: error: failed", EXIT_FAILURE, traceback=True)),
        (KeyboardInterrupt(), Ending("mmrun: interrupted", EXIT_INTERRUPTED)),
        (BrokenPipeError(), Ending(None, EXIT_BROKEN_PIPE)),
        (typer.Exit(EXIT_PARTIAL), Ending(None, EXIT_PARTIAL)),
        (typer.Exit(), Ending(None, 0)),
        (
            ValueError("x"),
            Ending(
                f"mmrun: error: unexpected ValueError: x (set {DEBUG_ENV}=1 for the traceback)",
                EXIT_FAILURE,
                traceback=True,
            ),
        ),
    ],
    ids=lambda value: type(value).__name__,
)
def test_each_exception_ends_with_its_line_and_code(exc: BaseException, expected: Ending) -> None:
    assert ending(exc) == expected


def test_what_the_user_typed_cannot_break_the_line() -> None:
    message = ending(MediaError("no such file: a\nb\x1b[31m.png")).message
    assert message == "mmrun: error: no such file: a\\nb\\x1b[31m.png"


def test_the_traceback_only_with_the_debug_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def raised() -> UsageError:
        try:
            raise UsageError("bad", hint="do this")
        except UsageError as exc:
            return exc

    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert end(raised()) == EXIT_USAGE
    assert capsys.readouterr().err == "mmrun: error: bad (do this)\n"
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert end(raised()) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("mmrun: error: bad (do this)\n")
    assert end(KeyboardInterrupt()) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "mmrun: interrupted\n"


def test_ctrl_c_in_a_command_is_one_line_and_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted() -> list[dict[str, object]]:
        raise KeyboardInterrupt

    monkeypatch.setattr("mmrun.cli.plugins.plugin_rows", interrupted)
    result = in_process(["plugins"])
    assert (result.exit_code, result.stdout, result.stderr) == (
        EXIT_INTERRUPTED,
        "",
        "mmrun: interrupted\n",
    )


def test_a_bug_in_a_command_is_one_line_and_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> list[dict[str, object]]:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("mmrun.cli.plugins.plugin_rows", broken)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    result = in_process(["plugins"])
    assert result.exit_code == EXIT_FAILURE and result.stdout == ""
    assert result.stderr == (
        "mmrun: error: unexpected ZeroDivisionError: division by zero "
        f"(set {DEBUG_ENV}=1 for the traceback)\n"
    )


def test_mmrun_uses_typer_without_click_or_subclasses() -> None:
    """Typer's public API only: click is Typer's own (vendored in recent releases)."""
    for path in sorted(MMRUN.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "click" or n.startswith(("click.", "typer.core")) for n in names), (
                f"{path}: imports {names}"
            )
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                assert not any("Typer" in base or "click" in base for base in bases), (
                    f"{path}: class {node.name}({', '.join(bases)})"
                )
