"""A batch: the prompts its output file does not hold yet, through the plan's backend, each
result line written as soon as its prompt is finished (to ``-o``, or handed to the caller),
and a table output (Parquet, CSV) written from its JSONL ledger at the end."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from mmrun.backends import Backend, backend_for
from mmrun.item import Item
from mmrun.outcome import Hooks, Outcome, Stats
from mmrun.plan import Plan
from mmrun.records import line, timestamp
from mmrun.results import Existing, OutputFile

# Each finished prompt: its outcome, its mmrun.batch/2 line, and the line as written (an
# OpenAI batch output line with --output-format openai).
ResultFn = Callable[[Outcome, dict[str, Any], dict[str, Any]], None]


class Batch:
    """One batch run of a plan: its output file opened (resumed, or started anew with
    ``overwrite``) and the prompts it already holds counted as skipped."""

    def __init__(self, plan: Plan) -> None:
        from mmrun.export import table_format

        self.plan = plan
        output = plan.output
        self.openai = output.format == "openai"
        # A table (-o results.parquet or .csv) is written from its JSONL ledger when the run
        # ends; the ledger is what a resumed run reads.
        self.table: str | None = None
        if output.path is not None and not self.openai:
            self.table = output.format if output.format in ("parquet", "csv") else None
            self.table = self.table or table_format(output.path)
        self.ledger = f"{output.path}.jsonl" if self.table and output.path else output.path
        self.file = (
            OutputFile(
                self.ledger, plan, overwrite=output.overwrite, retry_errors=output.retry_errors
            )
            if self.ledger is not None
            else None
        )
        self.existing = self.file.existing if self.file is not None else Existing()
        if self.file is not None and (self.existing.done or self.existing.failed):
            # A line whose own settings changed since its result was written runs again: its
            # old line goes, so that each id appears once.
            self.file.drop({item.id for item in plan.items if self.existing.changed(item)})
        self.skipped_done = 0
        self.skipped_failed = 0
        self.backend: Backend | None = None

    @property
    def to_stdout(self) -> bool:
        """Whether the result lines are the caller's to show (no output file)."""
        return self.file is None

    def todo(self) -> Iterator[Item]:
        """The prompts still to run, counting those skipped as it goes."""
        for item in self.plan.items:
            if self.existing.holds(item):
                if item.id in self.existing.done:
                    self.skipped_done += 1
                else:
                    self.skipped_failed += 1
                continue
            yield item

    def run(
        self,
        on_result: ResultFn,
        hooks: Hooks,
        backend: Backend | None = None,
        *,
        quiet: bool = False,
        verbose: bool = False,
    ) -> Stats:
        """Every prompt still to do, on ``backend`` (else the plan's, told ``quiet`` and
        ``verbose``); each result written and given to ``on_result``."""
        todo = self.todo()
        first = next(todo, None)
        if first is None:  # everything is done already: no engine to start
            stats = Stats()
        else:
            self.backend = backend or backend_for(self.plan, quiet=quiet, verbose=verbose)
            stats = self.backend.run(itertools.chain([first], todo), self._emit(on_result), hooks)
        stats.skipped = self.skipped_done + self.skipped_failed
        stats.failed_before = self.skipped_failed
        if self.file is not None:
            self.file.record_run(
                {
                    "done": stats.done,
                    "failed": stats.failed,
                    "skipped": stats.skipped,
                    "restarts": stats.restarts,
                    "finished": timestamp(time.time()),
                }
            )
        return stats

    def _emit(self, on_result: ResultFn) -> Callable[[Outcome], None]:
        dry_run, model = self.plan.dry_run, self.plan.model

        def emit(outcome: Outcome) -> None:
            row = line(outcome, dry_run=dry_run, finished_at=time.time())
            written = row
            if self.openai:
                from mmrun.inputs.openai_batch import output_line

                written = output_line(
                    row,
                    model,
                    text_completion=outcome.item.raw_prompt is not None,
                    completion=outcome.completion,
                )
            if self.file is not None:
                self.file.write(written)
            on_result(outcome, row, written)

        return emit

    def close(self) -> None:
        """Close the output file (what is written is on disk)."""
        if self.file is not None:
            self.file.close()

    def stop_engines(self) -> None:
        """Stop what the backend left running (a local engine, kept up for the results)."""
        if self.backend is not None:
            self.backend.close()

    def export(self) -> int | None:
        """Write the table output from the ledger; its row count, None without a table."""
        if not (self.table and self.ledger and self.plan.output.path):
            return None
        from mmrun.export import export

        return export(self.ledger, self.plan.output.path, self.table)
