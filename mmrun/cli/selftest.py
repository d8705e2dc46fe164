"""`mmrun selftest`: prove the installed vLLM runs mmrun's loaders, offline, in a minute or two.

It builds one tiny random-weight image checkpoint and one audio checkpoint in a temporary
folder (no download), writes small media files, and runs both through the same code path as
`mmrun image` / `mmrun audio`.
"""

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.cli._errors import error_boundary
from mmrun.errors import EngineError

CASES = (("image", "qwen2_5_vl"), ("audio", "whisper"))


def _write_media(folder: Path) -> dict[str, list[str]]:
    import numpy as np
    import soundfile
    from PIL import Image

    images = []
    for i, color in enumerate(((200, 30, 30), (30, 200, 30))):
        path = folder / f"image{i}.png"
        Image.new("RGB", (96, 64), color).save(path)
        images.append(str(path))
    t = np.linspace(0, 2.0, 32000, dtype=np.float32)
    audio = folder / "tone.wav"
    soundfile.write(audio, 0.3 * np.sin(2 * np.pi * 440 * t), 16000)
    return {"image": images, "audio": [str(audio)]}


@error_boundary
def selftest(
    json_out: o.JsonOpt = False,
    verbose: o.VerboseOpt = False,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Build into this folder and keep it.", show_default=False),
    ] = None,
) -> None:
    """Check the installed vLLM offline: tiny image and audio models, end to end."""
    from mmrun.cli._output import print_json, stderr_console, stdout_console
    from mmrun.engine import configure_environment, device_name
    from mmrun.engine.environment import stdout_to_stderr
    from mmrun.plan import RunOptions, check_supported, plan
    from mmrun.plugins import get_registry
    from mmrun.runner import run_named
    from mmrun.support import vllm_info
    from mmrun.templates import HFTemplateRenderer
    from mmrun.tiny import selftest_builders

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    configure_environment(verbose)
    err = stderr_console()
    steps: list[dict[str, Any]] = []

    def step(name: str, action: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            with stdout_to_stderr():
                value = action()
        except BaseException:
            err.print(f"[red]FAIL[/] {name}")
            raise
        seconds = time.perf_counter() - start
        steps.append({"step": name, "ok": True, "seconds": round(seconds, 2)})
        err.print(f"[green]ok[/]   {name} [dim]({seconds:.1f}s)[/]")
        return value

    folder = keep or Path(tempfile.mkdtemp(prefix="mmrun-selftest-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        registry = get_registry()
        version = step(
            "vLLM is installed and supports the selftest models",
            lambda: {check_supported(registry.get(m, k), vllm_info()) for m, k in CASES}.pop(),
        )
        media = step("write test media", lambda: _write_media(folder))
        for modality, key in CASES:
            build = selftest_builders()[(modality, key)]
            checkpoint = step(f"build tiny {key} checkpoint", partial(build, folder / key))
            opts = RunOptions(
                modality=modality,
                key=key,
                model=str(checkpoint.path),
                sources=tuple(media[modality]),
                max_tokens=8,
                num_prompts=2,
                # Eager: a check of the install, not of torch.compile (which adds ~40 s per start).
                engine_args={**checkpoint.engine_args, "enforce_eager": True},
            )
            the_plan = plan(opts, registry, vllm_info())
            result, engine = step(
                f"run {key} through vLLM (generate, 2 prompts)",
                partial(run_named, the_plan, HFTemplateRenderer),
            )
            if engine is not None:
                engine.close()
            outputs = result.outputs
            if len(outputs) != 2 or not all(out.completion_tokens > 0 for out in outputs):
                raise EngineError(f"{key}: expected 2 outputs with tokens, got {outputs}")
            steps[-1].update(
                prompt_tokens=outputs[0].prompt_tokens,
                engine_start_s=round(result.timings.get("engine_start_s", 0.0), 2),
            )
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
