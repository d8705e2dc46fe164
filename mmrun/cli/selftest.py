"""`mmrun selftest`: prove the installed vLLM runs mmrun's loaders, offline, without a GPU.

It builds the tiny random-weight checkpoints of mmrun.tiny in a temporary folder (no
download), has each one's modality write small media files, and runs each through the same
code path as `mmrun <modality>`.
"""

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.errors import EngineError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mmrun.registry import Registry


def selftest(
    json_out: o.JsonOpt = False,
    verbose: o.VerboseOpt = False,
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep", help="Build into this folder and keep it.", show_default=False, metavar="DIR"
        ),
    ] = None,
) -> None:
    """Check the installed vLLM offline: tiny random-weight models, end to end."""
    from mmrun.cli._output import print_json, stderr_console, stdout_console
    from mmrun.engine import configure_environment, device_name
    from mmrun.planning.checks import check_supported
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info
    from mmrun.tiny import selftest_builders

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    configure_environment(verbose)
    err = stderr_console()
    step = Steps(err, verbose)
    steps = step.done

    folder = keep or Path(tempfile.mkdtemp(prefix="mmrun-selftest-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        registry = get_registry()
        builders = selftest_builders()
        version = step(
            "vLLM is installed and supports the selftest models",
            lambda: {check_supported(registry.get(m, k), vllm_info()) for m, k in builders}.pop(),
        )
        media = step("write test media", lambda: _write_samples(registry, builders, folder))
        for (modality, key), build in builders.items():
            checkpoint = step(f"build tiny {key} checkpoint", partial(build, folder / key))
            figures = _run_tiny(modality, key, checkpoint, media[modality], step)
            steps[-1].update(figures)  # the run's step, which _run_tiny has just added
    finally:
        if keep is None:  # the tiny checkpoints and media were only for this check
            shutil.rmtree(folder, ignore_errors=True)
    device = device_name()
    scope = (
        "offline, with tiny random-weight models: this proves the install, not a real model "
        "(those need the Hugging Face Hub or a local checkpoint"
        + (")" if device == "cuda" else ", and a GPU to run at speed)")
    )
    if json_out:
        print_json({"ok": True, "vllm": version, "device": device, "steps": steps, "scope": scope})
    else:
        stdout_console().print(
            f"[bold green]selftest passed[/] (vLLM {version} on {device}, {len(steps)} steps)"
        )
        stdout_console().print(f"[dim]{scope}[/]")


class Steps:
    """The selftest's steps, each one line on stderr (``ok   name (1.2s)``). What vLLM, torch,
    Triton and transformers print meanwhile (warnings, progress bars of checkpoint shards) goes
    to the engine log, as in a batch; ``verbose`` (-v) shows it on stderr instead."""

    def __init__(self, err: Any, verbose: bool) -> None:
        self.err = err
        self.verbose = verbose
        self.done: list[dict[str, Any]] = []

    def __call__(self, name: str, action: Callable[[], Any]) -> Any:
        from mmrun.engine.output import engine_log_part, engine_output

        start = time.perf_counter()
        try:
            with engine_output(False, self.verbose):
                value = action()
        except BaseException:
            part = None if self.verbose else engine_log_part()
            log = part[0] if part else None
            where = f" [dim](vLLM's log: {log}; -v shows it here)[/]" if log else ""
            self.err.print(f"[red]FAIL[/] {name}{where}")
            raise
        seconds = time.perf_counter() - start
        self.done.append({"step": name, "ok": True, "seconds": round(seconds, 2)})
        self.err.print(f"[green]ok[/]   {name} [dim]({seconds:.1f}s)[/]")
        return value


def _write_samples(
    registry: "Registry", builders: "Mapping[tuple[str, str], Any]", folder: Path
) -> dict[str, list[str]]:
    """Each selftest modality's sample media, by modality."""
    media: dict[str, list[str]] = {}
    for modality, _ in builders:
        write = registry.modality(modality).write_samples
        if write is None:
            raise EngineError(f"the {modality} modality writes no sample media for the selftest")
        media.setdefault(modality, write(folder))
    return media


def _run_tiny(
    modality: str,
    key: str,
    checkpoint: Any,
    media: Sequence[str],
    step: Callable[[str, Callable[[], Any]], Any],
) -> dict[str, Any]:
    """Two prompts of a tiny checkpoint through vLLM, as ``mmrun MODALITY`` runs them."""
    from mmrun.api import run_plan
    from mmrun.planning import RunOptions, plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    opts = RunOptions(
        modality=modality,
        key=key,
        model=str(checkpoint.path),
        sources=tuple(media),
        max_tokens=8,
        num_prompts=2,
        # Eager: a check of the install, not of torch.compile (which adds ~40 s per start).
        engine_args={**checkpoint.engine_args, "enforce_eager": True},
    )
    the_plan = plan(opts, get_registry(), vllm_info())
    result, engine = step(
        f"run {key} through vLLM (generate, 2 prompts)",
        partial(run_plan, the_plan),
    )
    if engine is not None:
        engine.close()
    outputs = result.outputs
    if len(outputs) != 2 or not all(out.completion_tokens > 0 for out in outputs):
        raise EngineError(f"{key}: expected 2 outputs with tokens, got {outputs}")
    return {
        "prompt_tokens": outputs[0].prompt_tokens,
        "engine_start_s": round(result.timings.get("engine_start_s", 0.0), 2),
    }
