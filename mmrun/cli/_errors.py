"""The error boundary: MmrunError -> one line on stderr and its exit code; Ctrl-C -> 130."""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import typer
from typer.core import TyperGroup

from mmrun.errors import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, MmrunError

DEBUG_ENV = "MMRUN_DEBUG"
P = ParamSpec("P")
R = TypeVar("R")


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report(message: str) -> None:
    # Messages quote what the user typed (paths, URLs): a newline or an escape sequence in it
    # must not break the one line, or reach the terminal raw.
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    print(f"mmrun: error: {line}", file=sys.stderr, flush=True)


def stdout_closed() -> int:
    """The reader of standard output went away (`mmrun ... --json | head -3`): stop without a
    word, as Unix tools that SIGPIPE ends do, and with their status (141). What is still
    buffered for stdout goes to /dev/null, so that the interpreter's last flush does not
    print a second error."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def error_boundary(command: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so user errors end as one line and a documented exit code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MmrunError as exc:
            if _debug():
                traceback.print_exc()
            report(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            print("mmrun: interrupted", file=sys.stderr, flush=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            raise typer.Exit(stdout_closed()) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # a bug or an unexpected failure: still one line
            if _debug():
                traceback.print_exc()
            report(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)")
            raise typer.Exit(EXIT_FAILURE) from None

    return wrapper


def _is_usage_error(exc: Exception) -> bool:
    """Typer's parser (click) raises its own exception types; mmrun recognises them by their
    public interface rather than importing click, which Typer keeps private."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare `mmrun`: the help text is the answer
        return False
    return callable(getattr(exc, "format_message", None)) and isinstance(
        getattr(exc, "exit_code", None), int
    )


@contextlib.contextmanager
def _one_line_click_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not _is_usage_error(exc):
            raise
        text = exc.format_message()  # type: ignore[attr-defined]  # checked by _is_usage_error
        # Typer's choice check words it through pydantic: "Value error, 'x' is not one of ..."
        message = " ".join(str(text).split()).rstrip(".").replace("Value error, ", "")
        if message[:1].isupper() and message[1:2].islower():  # "No such ..." -> "no such ..."
            message = message[0].lower() + message[1:]
        ctx = getattr(exc, "ctx", None)
        message, suggestion = _closer_suggestion(message, ctx)
        hint = f" ({suggestion}see `{ctx.command_path if ctx is not None else 'mmrun'} --help`)"
        report(message + hint)
        raise typer.Exit(getattr(exc, "exit_code", 2)) from None


_NO_SUCH_OPTION = re.compile(r"^no such option: (\S+)")


def _closer_suggestion(message: str, ctx: Any) -> tuple[str, str]:
    """Typer's parser suggests any option that shares a few letters (`--bogus`: "Possible
    options: --verbose"); mmrun names one only when it is a likely typo of what was typed."""
    match = _NO_SUCH_OPTION.match(message)
    if match is None:
        return message, ""
    typed = match.group(1).split("=", 1)[0]
    known = [
        name
        for param in (getattr(getattr(ctx, "command", None), "params", None) or ())
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if name.startswith("--")
    ]
    close = difflib.get_close_matches(typed, known, n=1, cutoff=0.75)
    return f"no such option: {typed}", f"did you mean {close[0]}? " if close else ""


class OneLineErrorsGroup(TyperGroup):
    """The root command group, with click's own usage errors (an unknown command or option,
    a value that is not a number) reported as mmrun reports its own: one line on stderr and
    exit code 2, instead of a usage block and a panel. Use it as ``typer.Typer(cls=...)``."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        with _one_line_click_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _one_line_click_errors():  # the subcommand's own parsing happens in here
            return super().invoke(ctx)
