"""The error boundary: MmrunError -> one line on stderr and its exit code; Ctrl-C -> 130."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from mmrun.errors import EXIT_FAILURE, EXIT_INTERRUPTED, MmrunError

DEBUG_ENV = "MMRUN_DEBUG"
P = ParamSpec("P")
R = TypeVar("R")


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report(message: str) -> None:
    print(f"mmrun: error: {message}", file=sys.stderr, flush=True)


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
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # a bug or an unexpected failure: still one line
            if _debug():
                traceback.print_exc()
            report(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)")
            raise typer.Exit(EXIT_FAILURE) from None

    return wrapper
