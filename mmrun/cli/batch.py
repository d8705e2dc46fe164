"""A batch run's output: each prompt's result as it finishes (to ``-o``, or to stdout as JSON
lines or the terminal view), a progress bar, resuming, and the closing summary line."""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any, TextIO

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
from mmrun.engine.environment import engine_output
from mmrun.errors import EXIT_OK, EXIT_PARTIAL
from mmrun.inputs import Item
from mmrun.plan import Plan
from mmrun.results import Existing, Outcome, OutputFile, line
from mmrun.runner import Hooks, Stats
from mmrun.runner import run_batch as run_items


def run_batch(plan: Plan, *, json_out: bool, quiet: bool, verbose: bool = False) -> int:
    """Run a batch; the exit code (0: every prompt has a result; 3: some failed)."""
    from mmrun.export import table_format
    from mmrun.templates import HFTemplateRenderer

    opts = plan.options
    err = stderr_console()
    # A table (-o results.parquet or .csv) is written from its JSONL ledger when the run ends;
    # the ledger is what a resumed run reads.
    table = None
    if opts.output is not None and opts.output_format != "openai":
        table = opts.output_format if opts.output_format in ("parquet", "csv") else None
        table = table or table_format(opts.output)
    ledger = f"{opts.output}.jsonl" if table and opts.output else opts.output
    out = (
        OutputFile(ledger, plan, overwrite=opts.overwrite, retry_errors=opts.retry_errors)
        if ledger is not None
        else None
    )
    openai = opts.output_format == "openai"
    existing = out.existing if out is not None else Existing()
    if out is not None and (existing.done or existing.failed):
        # A line whose own settings changed since its result was written runs again: its
        # old line goes, so that each id appears once.
        out.drop({item.id for item in plan.items if existing.changed(item)})
    skipped = {"done": 0, "failed": 0}

    def skip(item: Item) -> bool:
        if not existing.holds(item):
            return False
        skipped["done" if item.id in existing.done else "failed"] += 1
        return True

    progress = None if quiet else BatchProgress(err, plan.items.total)
    starting = None if quiet else StartProgress(err, spinner=not verbose)
    results: list[TextIO] = []  # standard output, as it was before the engine's redirection
    dry_run = opts.dry_run
    engine_ready: list[float] = []

    def emit(outcome: Outcome) -> None:
        row = line(outcome, dry_run=dry_run, finished_at=time.time())
        written = row
        if openai:
            from mmrun.inputs.openai_batch import output_line

            written = output_line(row, plan.model)
        if out is not None:
            out.write(written)
        elif json_out:
            write_json_line(written, results[0])
        elif not quiet or outcome.error is None:
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
            progress.start(skipped=skipped["done"] + skipped["failed"])

    hooks = Hooks(on_engine_start=announce, on_started=started)
    t0 = time.monotonic()
    engine = None
    todo = (item for item in plan.items if not skip(item))
    first = next(todo, None)
    try:
        with engine_output(quiet, verbose) as stdout:
            results.append(stdout)
            if first is None:  # everything is done already: no engine to start
                stats = Stats()
            elif plan.replicas and not dry_run:
                from mmrun.parallel import run_parallel

                if not quiet:
                    err.print(f"[dim]mmrun: engines: {describe_engines(plan)}[/]")
                items = itertools.chain([first], todo)
                stats = run_parallel(
                    plan,
                    emit,
                    items,
                    list(plan.replicas),
                    quiet=quiet,
                    hooks=hooks,
                    on_replica_lost=None if quiet else _report_lost(err),
                    on_replica_ready=None if quiet else _report_ready(err),
                )
            elif plan.backend == "ray" and not dry_run:
                from mmrun.ray_backend import run_ray

                items = itertools.chain([first], todo)
                stats = run_ray(plan, emit, items, quiet=quiet, hooks=hooks, verbose=verbose)
            else:  # one local engine, or a dry run (the plan's engines, none started)
                if dry_run and (plan.replicas or plan.backend != "local") and not quiet:
                    err.print(f"[dim]mmrun: engines: {describe_engines(plan)}[/]")
                items = itertools.chain([first], todo)
                stats, engine = run_items(plan, HFTemplateRenderer, emit, items, hooks=hooks)
    finally:
        if starting is not None:
            starting.stop()
        if progress is not None:
            progress.close()
        if out is not None:
            out.close()
        if engine is not None:
            with engine_output(quiet, verbose):
                engine.close()
    stats.skipped = skipped["done"] + skipped["failed"]
    stats.failed_before = skipped["failed"]
    if table and ledger and opts.output:
        from mmrun.export import export

        rows = export(ledger, opts.output, table)
        if not quiet:
            err.print(f"[dim]mmrun: {rows} rows in {opts.output} (from {ledger})[/]")
    if not quiet:
        end = time.monotonic()
        err.print(
            summary(
                stats,
                end - t0,
                opts.output,
                throughput(stats, end - engine_ready[0] if engine_ready else None),
            ),
            highlight=False,
            markup=False,
        )
    sys.stdout.flush()
    return EXIT_PARTIAL if stats.failed or stats.failed_before else EXIT_OK


def _report_ready(err: Any) -> Any:
    def report(replica: Any, seconds: float) -> None:
        err.print(
            f"[dim]mmrun: replica {replica.index} ({replica.describe()}) ready after "
            f"{seconds:.1f}s[/]",
            highlight=False,
        )

    return report


def _report_lost(err: Any) -> Any:
    def report(replica: Any, reason: str, requeued: int) -> None:
        err.print(
            f"mmrun: replica {replica.index} ({replica.describe()}) stopped: {reason}; "
            f"its {requeued} unfinished prompt(s) go to the others",
            highlight=False,
            markup=False,
        )

    return report


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
    return text


def throughput(stats: Stats, seconds: float | None) -> str:
    """``51,234 prompt + 12,345 output tokens, 4.10 prompts/s, 81.0 output tok/s over 4m03s
    after the engine start``: vLLM's own token counts of the prompts done in this run, and
    the rates over the time since the engine was up; empty when none was generated."""
    if not stats.done or not (stats.prompt_tokens or stats.completion_tokens):
        return ""
    text = f"{stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} output tokens"
    if seconds is not None and seconds >= 1.0:  # a rate over less than a second says little
        text += (
            f", {stats.done / seconds:.2f} prompts/s, {stats.completion_tokens / seconds:.1f} "
            f"output tok/s over {duration(seconds)} after the engine start"
        )
    return text
