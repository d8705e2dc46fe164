"""A command line run in this process as the console script runs it: through
``mmrun.cli.main.run``, the CLI's one error boundary, with Typer's CliRunner isolating stdin,
stdout, stderr and the environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from typer.testing import CliRunner

from mmrun.cli.main import run


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr interleaved, as a terminal shows them


def in_process(
    args: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    input: str | bytes | None = None,
) -> Result:
    with CliRunner().isolation(input=input, env=env) as (stdout, stderr, output):
        code = run(args)
        sys.stdout.flush()
        sys.stderr.flush()
        return Result(
            code,
            stdout.getvalue().decode(errors="replace"),
            stderr.getvalue().decode(errors="replace"),
            output.getvalue().decode(errors="replace"),
        )
