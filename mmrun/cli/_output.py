"""What mmrun prints: results on stdout, everything else on stderr.

Conventions users bring from other tools hold here: ``NO_COLOR`` (https://no-color.org)
turns off every ANSI style, even on a terminal or with ``FORCE_COLOR``; ``--json`` puts one
document on stdout and nothing else; ``--quiet`` leaves the results alone on stdout and
nothing on stderr but an error.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

if TYPE_CHECKING:
    from mmrun.plan import Plan
    from mmrun.request import Prompt
    from mmrun.results import Outcome, RunResult

NO_COLOR_ENV = "NO_COLOR"


def color_disabled() -> bool:
    """True when the user set NO_COLOR to anything but the empty string (no-color.org)."""
    return os.environ.get(NO_COLOR_ENV, "") != ""


def _console(*, stderr: bool, file: TextIO | None = None) -> Console:
    # Rich's own NO_COLOR support drops colours but keeps bold and dim; no colour system at
    # all drops every escape sequence.
    if color_disabled():
        return Console(stderr=stderr, file=file, soft_wrap=True, color_system=None)
    return Console(stderr=stderr, file=file, soft_wrap=True)


def stdout_console(file: TextIO | None = None) -> Console:
    """Results on standard output (or on ``file``, standard output saved before a redirection)."""
    return _console(stderr=False, file=file)


def stderr_console() -> Console:
    return _console(stderr=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_texts(result: RunResult) -> None:
    """``--quiet`` without ``--json``: the generated text of each prompt, blocks separated by
    a blank line; for a dry run, the request's prompt (or its token ids) once."""
    if result.dry_run:
        prompt = result.prompt
        blocks = [
            prompt.text if prompt.text is not None else json.dumps(list(prompt.token_ids or ()))
        ]
    else:
        blocks = [output.text.strip() for output in result.outputs]
    sys.stdout.write("\n\n".join(blocks) + "\n")
    sys.stdout.flush()


def _heading(plan: Plan) -> str:
    spec = plan.spec
    return f"[bold]{spec.key}[/] ({escape(plan.model)}) · {spec.modality} · {plan.method}"


def print_result(result: RunResult, console: Console) -> None:
    plan = result.plan
    console.print(_heading(plan))
    console.print(f"[dim]question:[/] {escape(result.question)}")
    for item in result.media:
        describe = plan.modality.describe(item.info)
        console.print(f"[dim]media:[/] {escape(item.source)} [dim]{escape(describe)}[/]")
    if result.dry_run:
        _print_plan(result, console)
        return
    for i, output in enumerate(result.outputs):
        title = (
            f"prompt {i + 1}/{len(result.outputs)} · {output.prompt_tokens} prompt tokens · "
            f"{output.completion_tokens} generated · {output.finish_reason}"
        )
        error = result.errors.get(i)
        if error is not None:
            title += f" · [red]failed ({error.stage})[/]"
        console.print(
            Panel(escape(output.text.strip()) or "[dim](empty)[/]", title=title, title_align="left")
        )
        if error is not None:
            console.print(f"[red]{escape(error.message)}[/]")
    timings = " · ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in result.timings.items())
    console.print(f"[dim]{timings}[/]")


def _print_plan(result: RunResult, console: Console) -> None:
    from mmrun.results import request_json

    request = request_json(result.plan, result.prompt, result.lora_path)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    table.add_row("engine args", escape(json.dumps(request["engine_args"])))
    table.add_row("sampling", escape(json.dumps(request["sampling"])))
    if "modality_options" in request:
        table.add_row(result.plan.modality.name, escape(json.dumps(request["modality_options"])))
    if request["stop_token_ids"]:
        table.add_row("stop token ids", str(request["stop_token_ids"]))
    if request["lora"]:
        table.add_row("lora", escape(json.dumps(request["lora"])))
    if request["chat_template"]:
        table.add_row("chat template", escape(request["chat_template"]))
    table.add_row("prompts", str(request["num_prompts"]))
    table.add_row("engines", describe_engines(result.plan))
    console.print(table)
    _print_prompt(result.prompt, console)


def describe_engines(plan: Plan) -> str:
    """``2 (local), 1 GPU(s) each: GPU 0 | GPU 1``, ``2 (local) on CPU 0 | CPU 1``, or
    ``1 (local)``."""
    engines = plan.engines()
    text = f"{engines['replicas']} ({engines['backend']})"
    if plan.replicas and plan.replicas[0].gpus:
        text += f", {engines['gpus_per_replica']} GPU(s) each: "
    elif plan.replicas:
        text += " on "
    return text + " | ".join(r.describe() for r in plan.replicas)


def _print_prompt(prompt: Prompt, console: Console) -> None:
    if prompt.text is not None:
        console.print(Panel(escape(prompt.text), title="prompt", title_align="left"))
    else:
        console.print(
            Panel(str(list(prompt.token_ids or ())), title="prompt token ids", title_align="left")
        )


def write_json_line(row: Mapping[str, Any], stream: TextIO) -> None:
    """One batch line on stdout, flushed at once (a reader sees each prompt as it ends)."""
    stream.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    stream.flush()


def print_outcome(
    outcome: Outcome, row: Mapping[str, Any], console: Console, *, quiet: bool
) -> None:
    """One batch prompt on the terminal: a panel (its text, or its error), or with
    ``--quiet`` the text alone."""
    if quiet:
        console.file.write((row["text"] or "").strip() + "\n\n")
        console.file.flush()
        return
    if outcome.error is not None:
        title = f"{escape(outcome.item.id)} · [red]failed ({outcome.error.stage})[/]"
        body = escape(outcome.error.message)
        if outcome.completion is not None:  # an answer its constraint does not allow
            body += "\n" + escape(outcome.completion.text.strip())
    elif outcome.completion is None:  # a dry run: the prompt it would send
        title = f"{escape(outcome.item.id)} · dry run"
        body = escape(outcome.prompt.text or "") if outcome.prompt is not None else ""
    else:
        done = outcome.completion
        title = (
            f"{escape(outcome.item.id)} · {done.prompt_tokens} prompt tokens · "
            f"{done.completion_tokens} generated · {done.finish_reason}"
        )
        body = escape(done.text.strip()) or "[dim](empty)[/]"
    sources = ", ".join(outcome.item.sources)
    console.print(
        Panel(
            body,
            title=title,
            title_align="left",
            subtitle=escape(sources[:100]),
            subtitle_align="left",
        )
    )


class BatchProgress:
    """A batch's progress on stderr: a bar on a terminal (done/total, failed, prompts/s,
    tokens/s, time left); elsewhere (a CI log) a plain line at most every ``every_s`` seconds."""

    def __init__(self, console: Console, total: int, every_s: float = 10.0) -> None:
        import time

        self._console = console
        self._total = total
        self._every_s = every_s
        self._clock = time.monotonic
        self._done = 0
        self._failed = 0
        self._tokens = 0
        self._skipped = 0
        self._started = self._clock()
        self._last_line = self._started
        self._bar: Any = None
        self._task: Any = None

    def start(self, skipped: int) -> None:
        self._skipped = skipped
        self._started = self._last_line = self._clock()
        if not self._console.is_terminal:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]prompts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed · {task.fields[rate]}"),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(
            "prompts", total=self._total, completed=skipped, failed=0, rate=""
        )

    def advance(self, outcome: Outcome) -> None:
        self._done += 1
        if outcome.error is not None:
            self._failed += 1
        if outcome.completion is not None:
            self._tokens += outcome.completion.completion_tokens
        now = self._clock()
        elapsed = max(now - self._started, 1e-6)
        rate = f"{self._done / elapsed:.1f} prompts/s · {self._tokens / elapsed:.0f} tok/s"
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self._failed, rate=rate)
        elif now - self._last_line >= self._every_s:
            self._last_line = now
            finished = self._skipped + self._done
            left = self._total - finished
            eta = left / (self._done / elapsed) if self._done else 0.0
            self._console.print(
                f"mmrun: {finished}/{self._total} prompts, {self._failed} failed, {rate}, "
                f"about {eta:.0f}s left",
                highlight=False,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


class DownloadProgress:
    """A progress bar on stderr for downloads that take more than a moment.

    Thread-safe (downloads run in worker threads); shows nothing for downloads that finish
    within ``delay_s``, and nothing at all when stderr is not a terminal."""

    def __init__(self, console: Console, delay_s: float = 0.5) -> None:
        import threading
        import time

        self._console = console
        self._delay_s = delay_s
        self._clock = time.monotonic
        self._started = self._clock()
        self._lock = threading.Lock()
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __call__(self, url: str, done: int, total: int | None) -> None:
        if not self._console.is_terminal or self._clock() - self._started < self._delay_s:
            return
        with self._lock:
            if self._progress is None:
                from rich.progress import DownloadColumn, Progress, TextColumn, TransferSpeedColumn

                self._progress = Progress(
                    TextColumn("{task.description}"),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    console=self._console,
                    transient=True,
                )
                self._progress.start()
            if url not in self._tasks:
                name = url.rsplit("/", 1)[-1][:40] or url[:40]
                self._tasks[url] = self._progress.add_task(name, total=total)
            self._progress.update(self._tasks[url], completed=done, total=total)

    def close(self) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
