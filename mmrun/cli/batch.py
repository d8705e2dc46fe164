"""A batch run's view: each prompt's result as it finishes (to stdout as JSON lines or the
terminal view, where no ``-o`` file takes them), a progress bar, and the closing summary
line. The batch itself (resume, output file, backends) is the library's (mmrun.api.open_batch)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from mmrun.api import open_batch
from mmrun.cli._output import (
    BatchProgress,
    StartProgress,
    describe_engines,
    duration,
    print_outcome,
    stderr_console,
    stdout_console,
    write_json_line,
)
from mmrun.engine.output import engine_output
from mmrun.errors import EXIT_OK, EXIT_PARTIAL
from mmrun.outcome import Hooks, Outcome, Stats
from mmrun.plan import Plan


def run_batch(plan: Plan, *, json_out: bool, quiet: bool, verbose: bool = False) -> int:
    """Run a batch; the exit code (0: every prompt has a result; 3: some failed)."""
    err = stderr_console()
    batch = open_batch(plan)
    progress = None if quiet else BatchProgress(err, plan.items.total)
    starting = None if quiet else StartProgress(err, spinner=not verbose)
    results: list[TextIO] = []  # standard output, as it was before the engine's redirection
    engine_ready: list[float] = []

    def show(outcome: Outcome, row: dict[str, Any], written: dict[str, Any]) -> None:
        if batch.to_stdout and json_out:
            write_json_line(written, results[0])
        elif batch.to_stdout and (not quiet or outcome.error is None):
            print_outcome(outcome, row, stdout_console(results[0]), quiet=quiet)
        if progress is not None:
            progress.advance(outcome)

    def announce() -> None:
        if starting is not None:
            err.print("[dim]mmrun: starting vLLM (this takes a while the first time)...[/]")
            starting.start()

    def started(total: int) -> None:
        engine_ready.append(time.monotonic())
        if starting is not None:
            starting.stop()
        if progress is not None:
            progress.start(skipped=batch.skipped_done + batch.skipped_failed)

    def notice(text: str, warning: bool) -> None:
        err.print(text, style=None if warning else "dim", highlight=False, markup=False)

    hooks = Hooks(on_engine_start=announce, on_started=started, on_notice=None if quiet else notice)
    if (plan.engines.layout or (plan.dry_run and plan.engines.parallel)) and not quiet:
        err.print(f"[dim]mmrun: engines: {describe_engines(plan)}[/]")
    t0 = time.monotonic()
    try:
        with engine_output(quiet, verbose) as stdout:
            results.append(stdout)
            stats = batch.run(show, hooks, quiet=quiet, verbose=verbose)
    finally:
        if starting is not None:
            starting.stop()
        if progress is not None:
            progress.close()
        batch.close()
        if batch.backend is not None:  # its shutdown logs like its start
            with engine_output(quiet, verbose):
                batch.stop_engines()
    rows = batch.export()
    if rows is not None and not quiet:
        err.print(f"[dim]mmrun: {rows} rows in {plan.output.path} (from {batch.ledger})[/]")
    if not quiet:
        end = time.monotonic()
        err.print(
            summary(
                stats,
                end - t0,
                plan.output.path,
                throughput(stats, end - engine_ready[0] if engine_ready else None),
            ),
            highlight=False,
            markup=False,
        )
    sys.stdout.flush()
    return EXIT_PARTIAL if stats.failed or stats.failed_before else EXIT_OK


def summary(stats: Stats, seconds: float, output: str | None, tokens: str = "") -> str:
    """``998 done, 2 failed, 0 skipped in 3m12s; <tokens>; errors in out.jsonl``."""
    text = (
        f"{stats.done} done, {stats.failed} failed, {stats.skipped} skipped in {duration(seconds)}"
    )
    if tokens:
        text += f"; {tokens}"
    if stats.failed and output:
        text += f"; errors in {output}"
    if stats.failed_before:
        text += f"; {stats.failed_before} failed in an earlier run (--retry-errors runs them again)"
    if stats.restarts:
        text += f"; the engine was started again {stats.restarts} time(s) after it died"
    return text


def throughput(stats: Stats, seconds: float | None) -> str:
    """``51,234 prompt + 12,345 output tokens, 4.10 prompts/s, 81.0 output tok/s over 4m03s
    after the engine start``: vLLM's own token counts of the prompts done in this run, and
    the rates over the time since the engine was up, whatever the input (a folder, a manifest,
    a table) and however short the run; empty when none was generated."""
    if not stats.done or not (stats.prompt_tokens or stats.completion_tokens):
        return ""
    text = f"{stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} output tokens"
    if seconds is not None and seconds > 0:
        text += (
            f", {stats.done / seconds:.2f} prompts/s, {stats.completion_tokens / seconds:.1f} "
            f"output tok/s over {duration(seconds)} after the engine start"
        )
    return text
