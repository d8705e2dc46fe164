"""The CLI's one error boundary: what each exception a command line ends with prints (one
line on stderr: what is wrong, and what to do) and its exit code (mmrun.errors). ``main()``
applies it once, around the whole app; the commands themselves only raise."""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from mmrun.errors import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, MmrunError

DEBUG_ENV = "MMRUN_DEBUG"


@dataclass(frozen=True)
class Ending:
    """How a command line ends.

    message: what it prints on stderr (None: nothing).
    code: its exit code.
    traceback: ``MMRUN_DEBUG=1`` prints the exception's traceback first.
    """

    message: str | None
    code: int
    traceback: bool = False


def error_line(message: str) -> str:
    # Messages quote what the user typed (paths, URLs): a newline or an escape sequence in it
    # must not break the one line, or reach the terminal raw.
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    return f"mmrun: error: {line}"


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


# Each exception type (the first that matches, in this order) and how it ends the command
# line. An MmrunError carries its own message, hint ("what to do") and exit code.
ENDINGS: dict[type[BaseException], Callable[[Any], Ending]] = {
    MmrunError: lambda exc: Ending(error_line(str(exc)), exc.exit_code, traceback=True),
    KeyboardInterrupt: lambda exc: Ending("mmrun: interrupted", EXIT_INTERRUPTED),
    BrokenPipeError: lambda exc: Ending(None, EXIT_BROKEN_PIPE),
    typer.Exit: lambda exc: Ending(None, exc.exit_code),
}


def ending(exc: BaseException) -> Ending:
    """How ``exc`` ends the command line: its row in ENDINGS, else a usage error of Typer's
    parser (exit 2), else an unexpected failure, a bug: still one line, and exit 1."""
    for kind, describe in ENDINGS.items():
        if isinstance(exc, kind):
            return describe(exc)
    if _is_usage_error(exc):
        return _usage_ending(exc)
    message = f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)"
    return Ending(error_line(message), EXIT_FAILURE, traceback=True)


def end(exc: BaseException) -> int:
    """Print how ``exc`` ends the command line; return its exit code."""
    done = ending(exc)
    if done.traceback and os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exception(exc)
    if done.message is not None:
        print(done.message, file=sys.stderr, flush=True)
    if done.code == EXIT_BROKEN_PIPE:
        return stdout_closed()
    return done.code


def _is_usage_error(exc: BaseException) -> bool:
    """Typer's parser (click) raises its own exception types; mmrun recognises them by their
    public interface rather than importing click, which Typer keeps private."""
    return callable(getattr(exc, "format_message", None)) and isinstance(
        getattr(exc, "exit_code", None), int
    )


def _usage_ending(exc: Any) -> Ending:
    """A usage error in mmrun's words, with the command's --help as what to do."""
    text = str(exc.format_message())
    if type(exc).__name__ == "NoArgsIsHelpError":
        # Bare `mmrun`: the help is the answer, as Typer shows it (Rich has printed it already
        # and left no text; the plain formatter leaves the text, for stderr).
        return Ending(text or None, exc.exit_code)
    # Typer's choice check words it through pydantic: "Value error, 'x' is not one of ..."
    message = " ".join(text.split()).rstrip(".").replace("Value error, ", "")
    if message[:1].isupper() and message[1:2].islower():  # "No such ..." -> "no such ..."
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    message, suggestion = _closer_suggestion(message, ctx)
    hint = f" ({suggestion}see `{ctx.command_path if ctx is not None else 'mmrun'} --help`)"
    return Ending(error_line(message + hint), exc.exit_code)


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
