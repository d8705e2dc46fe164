"""The root of the CLI: it wires the command groups, and ``main()`` ends every command line
through the one error boundary (mmrun.cli._errors)."""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence

import typer

from mmrun.cli._errors import end, stdout_closed
from mmrun.cli._output import color_disabled
from mmrun.cli.export import export
from mmrun.cli.models import models
from mmrun.cli.plugins import plugins
from mmrun.cli.review import (
    COMPARE_EXAMPLES,
    REPORT_EXAMPLES,
    SCORE_EXAMPLES,
    compare,
    report,
    score,
)
from mmrun.cli.run import HELP_ALL, epilog, make_command, plain_help
from mmrun.cli.selftest import selftest
from mmrun.cli.serve import SERVE_EXAMPLES, serve
from mmrun.errors import EXIT_FAILURE, EXIT_OK
from mmrun.plugins import get_registry
from mmrun.version import __version__

app = typer.Typer(
    name="mmrun",
    help="Run vision-, audio- and video-language models on images, audio and video through "
    "vLLM, with the right prompt format for each model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Typer's Rich help and error panels keep bold and dim under NO_COLOR; its plain
    # formatter prints no escape sequence at all.
    rich_markup_mode=None if color_disabled() else "rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"mmrun {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
        metavar="",
    ),
) -> None:
    """mmrun: one command to run a multimodal model through vLLM."""


# One command per modality, built-in or from a plugin.
for _modality in get_registry().modalities.values():
    _companions = [
        get_registry().modalities[name]
        for name in _modality.companions
        if name in get_registry().modalities
    ]
    app.command(_modality.name, epilog=epilog(_modality))(make_command(_modality, _companions))
app.command("models")(models)
app.command("plugins")(plugins)
app.command("selftest")(selftest)
app.command("serve", epilog=SERVE_EXAMPLES)(serve)
app.command("report", epilog=REPORT_EXAMPLES)(report)
app.command("score", epilog=SCORE_EXAMPLES)(score)
app.command("compare", epilog=COMPARE_EXAMPLES)(compare)
app.command("export", epilog="Example:\n\n  mmrun export results.jsonl results.parquet")(export)


# A fixed program name, so that `python -m mmrun` and the `mmrun` script share one
# completion variable and one usage line.
PROG_NAME = "mmrun"
COMPLETE_VAR = "_MMRUN_COMPLETE"


def run(args: Sequence[str]) -> int:
    """Run one command line in this process; return its exit code. Whatever it ends with, a
    user error, a usage error of Typer's parser, Ctrl-C or a bug, has been printed by then
    as its one line (mmrun.cli._errors)."""
    show_all = HELP_ALL in args
    args = ["--help" if arg == HELP_ALL else arg for arg in args]
    command = typer.main.get_command(app)
    plain_help(command, show_all)
    try:
        with command.make_context(PROG_NAME, list(args)) as ctx:
            command.invoke(ctx)
    except (Exception, KeyboardInterrupt) as exc:
        return end(exc)
    return EXIT_OK


def main() -> None:
    """The console script: the command line's exit code, without the interpreter's slow
    teardown once vLLM or torch were loaded."""
    if os.environ.get(COMPLETE_VAR):  # a shell asking for completions: Typer answers, exits
        app(prog_name=PROG_NAME, complete_var=COMPLETE_VAR)
    stdout_was = _identity(1)
    code: object
    try:
        code = run(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    if code == EXIT_FAILURE and _stdout_silenced(stdout_was):
        # Rich (printing --help) meets a closed pipe itself: it points stdout at /dev/null
        # and exits 1. End as every other closed-pipe path does.
        code = stdout_closed()
    if not _HEAVY.isdisjoint(sys.modules):
        _exit_now(code)
    try:  # what is still buffered, now rather than in the interpreter's teardown
        sys.stdout.flush()
    except BrokenPipeError:
        code = code or stdout_closed()
    raise SystemExit(code)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _stdout_silenced(before: tuple[int, int] | None) -> bool:
    """Whether stdout was a pipe or file and is /dev/null now (see main)."""
    now = _identity(1)
    try:
        devnull = os.stat(os.devnull)
    except OSError:
        return False
    return now != before and now == (devnull.st_dev, devnull.st_ino)


# Loaded by a run (even partly, when it was interrupted): from then on the interpreter's
# teardown is slow, and it would wait for threads that an interrupt may have left stuck.
_HEAVY = frozenset({"vllm", "torch", "transformers"})


def _exit_now(code: object) -> None:
    """End the process without the interpreter's teardown, which after vLLM and torch have
    been loaded takes about 2 s (measured on the CPU engine) and does nothing a finished run
    needs: exit handlers still run (they remove temporary folders), output is flushed."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message")
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `mmrun ... | head`: its reader has gone
            status = status or stdout_closed()
        except (OSError, ValueError):  # a closed stream
            status = status or 1
    os._exit(status)
