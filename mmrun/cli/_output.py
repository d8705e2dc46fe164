"""What mmrun prints: results on stdout, everything else on stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mmrun.runner import RunResult


def stdout_console() -> Console:
    return Console(soft_wrap=True)


def stderr_console() -> Console:
    return Console(stderr=True, soft_wrap=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while vLLM runs, so that nothing it or its worker
    processes print can mix into the results that mmrun prints on stdout afterwards."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


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
        title = (f"prompt {i + 1}/{len(result.outputs)} · {output.prompt_tokens} prompt tokens · "
                 f"{output.completion_tokens} generated · {output.finish_reason}")
        console.print(Panel(escape(output.text.strip()) or "[dim](empty)[/]", title=title,
                            title_align="left"))
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
        console.print(Panel(str(list(result.request.prompt_token_ids or ())), title="prompt token ids",
                            title_align="left"))
