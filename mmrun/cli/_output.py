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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mmrun.engine.output import terminal_stderr
from mmrun.errors import shown

if TYPE_CHECKING:
    from mmrun.api import RunResult
    from mmrun.outcome import Outcome
    from mmrun.plan import Plan
    from mmrun.request import Prompt

NO_COLOR_ENV = "NO_COLOR"
# What the terminal shows, dim, for an answer that is empty or only whitespace (--json and
# the result lines keep its text as it came, with its finish reason).
EMPTY_ANSWER = "(empty answer)"


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


class _Stderr:
    """mmrun's own stderr, wherever the engine's output is meanwhile (see
    mmrun.engine.output.engine_output)."""

    def write(self, text: str) -> int:
        return terminal_stderr().write(text)

    def flush(self) -> None:
        terminal_stderr().flush()

    def isatty(self) -> bool:
        return terminal_stderr().isatty()

    def fileno(self) -> int:
        return terminal_stderr().fileno()


STDERR: TextIO = _Stderr()  # type: ignore[assignment]  # a TextIO in all a Console uses


def stderr_console() -> Console:
    return _console(stderr=False, file=STDERR)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_texts(result: RunResult) -> None:
    """``--quiet`` without ``--json``: the generated text of each prompt, blocks separated by
    a blank line; for a dry run, the request's prompt (or its token ids) once."""
    if result.plan.dry_run:
        prompt = result.prompt
        if prompt is None:  # the prompt is all this prints: without it, a failure
            from mmrun.errors import MmrunError

            raise MmrunError(f"--quiet --dry-run prints the prompt, which is {result.prompt_note}")
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
    if plan.spec.takes_question:
        console.print(f"[dim]question:[/] {escape(result.question)}")
    else:  # a fixed prompt (a transcriber's task header): the question is never read
        console.print(f"[dim]question:[/] none ({plan.spec.key} takes no question)")
    for item in result.media:
        describe = "(not fetched)" if item.not_fetched else plan.modality.describe(item.info)
        console.print(f"[dim]media:[/] {escape(shown(item.source))} [dim]{escape(describe)}[/]")
    missing = [item for item in result.media if item.not_fetched]
    if missing:
        console.print(_not_fetched_note(plan, missing), soft_wrap=True, highlight=False)
    if result.plan.dry_run:
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
        console.print(_panel(output.text.strip(), title=title, empty=EMPTY_ANSWER), soft_wrap=False)
        if error is not None:
            console.print(f"[red]{escape(error.message)}[/]")
    timings = " · ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in result.timings.items())
    console.print(f"[dim]{timings}[/]")


def _not_fetched_note(plan: Plan, missing: list[Any]) -> str:
    """One line: which default media a dry run could not fetch, why, and what to do."""
    noun = plan.modality.name
    what = f"the default {noun}" if len(missing) == 1 else f"{len(missing)} default {noun}s"
    why = str(missing[0].not_fetched).split("; the fallback")[0]  # the first source's failure
    return (
        f"[yellow]note:[/] {what} could not be fetched ({escape(why)}): the request below "
        f"holds {'its name' if len(missing) == 1 else 'their names'} in place of the "
        f"{noun}; name your own with {plan.modality.option}, or set MMRUN_ASSETS_BASE_URL "
        "to a mirror"
    )


def _print_plan(result: RunResult, console: Console) -> None:
    from mmrun.records import request_json

    request = request_json(result.plan, result.prompt, result.lora_path)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    # A row's request can differ by vLLM version (LoaderSpec.changes): say which one this is.
    version = result.plan.vllm_version
    table.add_row("for vLLM", version or "not installed (the row as declared)")
    if result.plan.model_choice:
        table.add_row("model", escape(result.plan.model_choice))
    table.add_row("engine args", escape(json.dumps(request["engine_args"])))
    table.add_row("sampling", escape(json.dumps(request["sampling"])))
    if "modality_options" in request:
        table.add_row(result.plan.modality.name, escape(json.dumps(request["modality_options"])))
    for name, sources in (request.get("with_media") or {}).items():
        table.add_row(
            f"with each {result.plan.modality.name}", escape(f"{name}: {', '.join(sources)}")
        )
    if request["stop_token_ids"]:
        table.add_row("stop token ids", str(request["stop_token_ids"]))
    if request["lora"]:
        table.add_row("lora", escape(json.dumps(request["lora"])))
    if request["chat_template"]:
        table.add_row("chat template", escape(request["chat_template"]))
    table.add_row("prompts", str(request["num_prompts"]))
    table.add_row("engines", describe_engines(result.plan))
    console.print(table, soft_wrap=False)
    _print_prompt(result.prompt, result.prompt_note, console)


def describe_engines(plan: Plan) -> str:
    """``2 (local), 1 GPU(s) each: GPU 0 | GPU 1``, ``2 (local) on CPU 0 | CPU 1``, or
    ``1 (local)``."""
    engines = plan.engines.as_json(plan.engine_args)
    layout = plan.engines.layout
    text = f"{engines['replicas']} ({engines['backend']})"
    if layout and layout[0].gpus:
        text += f", {engines['gpus_per_replica']} GPU(s) each: "
    elif layout:
        text += " on "
    return text + " | ".join(r.describe() for r in layout)


def _panel(
    text: str,
    *,
    title: str,
    subtitle: str | None = None,
    dim: bool = False,
    empty: str = "(empty)",
) -> Panel:
    """A panel whose text wraps at the terminal's width, and folds what has no space to wrap
    at (a run of image placeholder tokens): nothing a user checks is cut. The console's
    soft wrap (which keeps long result lines whole when piped) must be off when it prints.
    ``empty``: what it shows, dim, for a text that is empty or only whitespace."""
    from rich.text import Text

    body = (
        Text(text, overflow="fold", style="dim" if dim else "")
        if text.strip()
        else Text(empty, style="dim")
    )
    return Panel(
        body,
        title=title,
        title_align="left",
        subtitle=subtitle,
        subtitle_align="left",
    )


def _print_prompt(prompt: Prompt | None, note: str | None, console: Console) -> None:
    if prompt is None:
        console.print(_panel(note or "", title="prompt (not rendered)", dim=True), soft_wrap=False)
    elif prompt.text is not None:
        console.print(_panel(prompt.text, title="prompt"), soft_wrap=False)
    else:
        console.print(
            _panel(str(list(prompt.token_ids or ())), title="prompt token ids"), soft_wrap=False
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
    dim, empty = False, "(empty)"
    if outcome.error is not None:
        title = f"{escape(outcome.item.id)} · [red]failed ({outcome.error.stage})[/]"
        body = outcome.error.message
        if outcome.completion is not None:  # an answer its constraint does not allow
            body += "\n" + outcome.completion.text.strip()
    elif outcome.completion is None:  # a dry run: the prompt it would send
        title = f"{escape(outcome.item.id)} · dry run"
        prompt = outcome.prompt
        if prompt is None:
            body, dim = outcome.prompt_note or "", True
        elif prompt.text is not None:
            body = prompt.text
        else:
            body = str(list(prompt.token_ids or ()))
    else:
        done = outcome.completion
        title = (
            f"{escape(outcome.item.id)} · {done.prompt_tokens} prompt tokens · "
            f"{done.completion_tokens} generated · {done.finish_reason}"
        )
        body, empty = done.text.strip(), EMPTY_ANSWER
    subtitle = escape(_sources(outcome.item.media_names))
    console.print(
        _panel(body, title=title, subtitle=subtitle, dim=dim, empty=empty), soft_wrap=False
    )


def _sources(sources: Sequence[str], room: int = 100) -> str:
    """The prompt's media for a panel's subtitle (one line): the whole list, or as many as
    fit and how many more (``--json`` and ``-o`` lines list them all)."""
    sources = [shown(source) for source in sources]
    text = ", ".join(sources)
    if len(text) <= room:
        return text
    fits: list[str] = []
    for source in sources:
        if len(", ".join([*fits, source])) > room - 12:
            break
        fits.append(source)
    more = len(sources) - len(fits)
    if not fits:  # one long source: its start, marked as cut
        return sources[0][: room - 13] + "…" + (f", +{more - 1} more" if more > 1 else "")
    return ", ".join(fits) + f", +{more} more"


class StartProgress:
    """While vLLM starts (tens of seconds on a CPU, minutes for a large model): a spinner
    with the seconds so far on a terminal; elsewhere (a CI log) a plain line every
    ``every_s`` seconds, so that a log shows the run is alive."""

    def __init__(self, console: Console, every_s: float = 10.0, spinner: bool = True) -> None:
        """``spinner``: False where other output shares the terminal (-v: vLLM's log), which
        a spinner's redraws would garble; plain lines then."""
        import threading
        import time

        self._console = console
        self._every_s = every_s
        self._spinner = spinner
        self._clock = time.monotonic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None
        self._t0 = self._clock()

    def start(self, what: str | Callable[[], str] = "starting vLLM") -> None:
        """``what``: the words, or a function that gives the whole line each time."""
        import threading

        self._t0 = self._clock()
        if self._spinner and self._console.is_terminal and isinstance(what, str):
            self._status = self._console.status(f"[dim]mmrun: {escape(what)}...[/]")
            self._status.start()
        self._thread = threading.Thread(
            target=self._tick, args=(what,), name="mmrun-progress", daemon=True
        )
        self._thread.start()

    def _tick(self, what: str | Callable[[], str]) -> None:
        while not self._stop.wait(1.0 if self._status is not None else self._every_s):
            seconds = self._clock() - self._t0
            text = f"{what}... {seconds:.0f}s" if isinstance(what, str) else what()
            if self._status is not None:
                self._status.update(f"[dim]mmrun: {escape(text)}[/]")
            else:
                self._console.print(f"mmrun: {text}", highlight=False, markup=False)

    def stop(self) -> None:
        """Idempotent: the engine is up, or the run ended before it was."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._status is not None:
            self._status.stop()
            self._status = None


class BatchProgress:
    """A batch's progress on stderr: a bar on a terminal (done/total, failed, prompts/s,
    tokens/s, time left); elsewhere (a CI log) a plain line at most every ``every_s`` seconds.

    Rates and the time left come from the results: from the first result on (the prompts
    of a batch run together, so the first ones finish only after a while, and a rate over the
    time before that would be far too low), and only once there are two results to measure."""

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
        self._first: float | None = None
        self._first_tokens = 0
        self._bar: Any = None
        self._task: Any = None
        self._ticker: StartProgress | None = None

    def start(self, skipped: int) -> None:
        self._skipped = skipped
        self._started = self._clock()
        if not self._console.is_terminal:
            # A line every few seconds whether or not a prompt finished meanwhile (the first
            # ones of a large batch take a while): the log shows the run is alive.
            self._ticker = StartProgress(self._console, self._every_s)
            self._ticker.start(self.line)
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]prompts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed · {task.fields[rate]}"),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(
            "prompts", total=self._total, completed=skipped, failed=0, rate="measuring"
        )

    def _rates(self, now: float) -> tuple[str, float | None]:
        """``"2.1 prompts/s · 140 tok/s · about 5m12s left"`` and the prompts/s, or a note
        while there is nothing to measure yet."""
        if self._first is None or self._done < 2 or now - self._first < 1e-3:
            return "measuring", None
        window = now - self._first
        per_s = (self._done - 1) / window
        tokens = (self._tokens - self._first_tokens) / window
        left = self._total - self._skipped - self._done
        text = f"{per_s:.1f} prompts/s · {tokens:.0f} tok/s"
        if left > 0 and per_s > 0:
            text += f" · about {duration(left / per_s)} left"
        return text, per_s

    def advance(self, outcome: Outcome) -> None:
        now = self._clock()
        self._done += 1
        if outcome.error is not None:
            self._failed += 1
        if outcome.completion is not None:
            self._tokens += outcome.completion.generated_tokens
        if self._first is None:
            self._first, self._first_tokens = now, self._tokens
        if self._bar is not None:
            rate, _ = self._rates(now)
            self._bar.update(self._task, advance=1, failed=self._failed, rate=rate)

    def line(self) -> str:
        """The plain progress line: ``12/300 prompts, 0 failed, 2.1 prompts/s · ...``."""
        rate, _ = self._rates(self._clock())
        finished = self._skipped + self._done
        return f"{finished}/{self._total} prompts, {self._failed} failed, {rate}"

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
        if self._bar is not None:
            self._bar.stop()


def duration(seconds: float) -> str:
    """``3m12s``, ``1h02m03s``, ``4.2s``."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.1f}s"


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
