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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

if TYPE_CHECKING:
    from mmrun.runner import RunResult

NO_COLOR_ENV = "NO_COLOR"


def color_disabled() -> bool:
    """True when the user set NO_COLOR to anything but the empty string (no-color.org)."""
    return os.environ.get(NO_COLOR_ENV, "") != ""


def _console(*, stderr: bool) -> Console:
    # Rich's own NO_COLOR support drops colours but keeps bold and dim; no colour system at
    # all drops every escape sequence.
    if color_disabled():
        return Console(stderr=stderr, soft_wrap=True, color_system=None)
    return Console(stderr=stderr, soft_wrap=True)


def stdout_console() -> Console:
    return _console(stderr=False)


def stderr_console() -> Console:
    return _console(stderr=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


@contextmanager
def _redirect(fd: int, target: int) -> Iterator[None]:
    """Point file descriptor ``fd`` at ``target`` (another descriptor) until the block ends."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved, fd)
        os.close(saved)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while vLLM runs, so that nothing it or its worker
    processes print can mix into the results that mmrun prints on stdout afterwards."""
    with _redirect(1, 2):
        yield


@contextmanager
def engine_output(quiet: bool) -> Iterator[None]:
    """Where what vLLM, torch and transformers print goes while a run is planned and executed:
    to stderr, or with ``--quiet`` nowhere. A failure still ends as mmrun's one-line error,
    printed by the error boundary once the descriptors are restored."""
    if not quiet:
        with stdout_to_stderr():
            yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _redirect(1, devnull), _redirect(2, devnull):
            yield
    finally:
        os.close(devnull)


def print_texts(result: RunResult) -> None:
    """``--quiet`` without ``--json``: the generated text of each prompt, blocks separated by
    a blank line; for a dry run, the request's prompt (or its token ids) once."""
    if result.dry_run:
        request = result.request
        blocks = [
            request.prompt
            if request.prompt is not None
            else json.dumps(list(request.prompt_token_ids or ()))
        ]
    else:
        blocks = [output.text.strip() for output in result.outputs]
    sys.stdout.write("\n\n".join(blocks) + "\n")
    sys.stdout.flush()


def print_result(result: RunResult, console: Console) -> None:
    spec = result.spec
    head = f"[bold]{spec.key}[/] ({escape(result.model)}) · {spec.modality} · {result.method}"
    console.print(head)
    console.print(f"[dim]question:[/] {escape(result.question)}")
    for item in result.media:
        console.print(f"[dim]media:[/] {escape(item.source)} [dim]{_describe(item.info)}[/]")
    if result.dry_run:
        _print_plan(result, console)
        return
    for i, output in enumerate(result.outputs):
        title = (
            f"prompt {i + 1}/{len(result.outputs)} · {output.prompt_tokens} prompt tokens · "
            f"{output.completion_tokens} generated · {output.finish_reason}"
        )
        console.print(
            Panel(escape(output.text.strip()) or "[dim](empty)[/]", title=title, title_align="left")
        )
    timings = " · ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in result.timings.items())
    console.print(f"[dim]{timings}[/]")


def _describe(info: dict[str, Any]) -> str:
    if "width" in info:
        return f"{info['width']}x{info['height']}"
    return f"{info['duration_s']:.2f}s @ {info['sample_rate']} Hz"


def _print_plan(result: RunResult, console: Console) -> None:
    document = result.to_json()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    request = document["request"]
    table.add_row("engine args", escape(json.dumps(request["engine_args"])))
    table.add_row("sampling", escape(json.dumps(request["sampling"])))
    if request["stop_token_ids"]:
        table.add_row("stop token ids", str(request["stop_token_ids"]))
    if request["lora"]:
        table.add_row("lora", escape(json.dumps(request["lora"])))
    if request["chat_template"]:
        table.add_row("chat template", escape(request["chat_template"]))
    table.add_row("prompts", str(request["num_prompts"]))
    console.print(table)
    if result.request.prompt is not None:
        console.print(Panel(escape(result.request.prompt), title="prompt", title_align="left"))
    else:
        console.print(
            Panel(
                str(list(result.request.prompt_token_ids or ())),
                title="prompt token ids",
                title_align="left",
            )
        )


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
