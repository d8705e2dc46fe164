"""`mmrun image` and `mmrun audio`: one command factory, one command per modality."""

# No `from __future__ import annotations`: Typer reads the closure-built option annotations at runtime.

from collections.abc import Callable
from typing import Annotated, Any

import typer

from mmrun.cli import _options as o
from mmrun.cli._errors import error_boundary
from mmrun.errors import UsageError

EPILOGS = {
    "image": "Examples:\n\n  mmrun image -m qwen2_5_vl -n 4\n\n"
    "  mmrun image -m idefics3 -i a.png -i b.png --dry-run --json",
    "audio": "Examples:\n\n  mmrun audio -m whisper\n\n"
    "  mmrun audio -m qwen2_audio -a a.wav -a b.wav --json",
}


def _execute(modality: str, sources: list[str] | None, count: int | None, **kw: Any) -> None:
    # Imported here, not at the top: `mmrun --help` must stay fast.
    from mmrun.capture import show_library_output
    from mmrun.cli._output import (
        DownloadProgress,
        engine_output,
        print_json,
        print_result,
        print_texts,
        stderr_console,
        stdout_console,
    )
    from mmrun.engine import configure_environment
    from mmrun.plugins import get_registry
    from mmrun.runner import RunOptions, parse_engine_args, run
    from mmrun.templates import HFTemplateRenderer

    json_out, quiet, verbose = kw.pop("json_out"), kw.pop("quiet"), kw.pop("verbose")
    if quiet and verbose:
        raise UsageError("--quiet and --verbose contradict each other", hint="pass one of them")
    if kw["method"] not in ("generate", "chat"):
        raise UsageError(f"unknown --method {kw['method']!r}", hint="use generate or chat")
    opts = RunOptions(
        modality=modality,
        key=kw["key"],
        sources=tuple(sources or ()),
        count=count,
        question=kw["question"],
        method=kw["method"],
        num_prompts=kw["num_prompts"],
        seed=kw["seed"],
        max_tokens=kw["max_tokens"],
        temperature=kw["temperature"],
        model=kw["model"],
        tensor_parallel_size=kw["tensor_parallel_size"],
        engine_args=parse_engine_args(kw["engine_arg"] or []),
        sampling_args=parse_engine_args(kw["sampling_arg"] or [], option="--sampling-arg"),
        trust_remote_code=kw["trust_remote_code"],
        dry_run=kw["dry_run"],
        per_prompt=kw["per_prompt"],
        warmup=kw["warmup"],
    )
    configure_environment(verbose)
    show_library_output(verbose)
    err = stderr_console()

    def announce() -> None:
        if not quiet:
            err.print("[dim]mmrun: starting vLLM (this takes a while the first time)...[/]")

    progress = DownloadProgress(err) if not quiet else None
    try:
        with engine_output(quiet):
            result = run(
                opts,
                get_registry(),
                HFTemplateRenderer,
                on_engine_start=announce,
                on_progress=progress,
            )
    finally:
        if progress is not None:
            progress.close()
    try:
        if json_out:
            print_json(result.to_json())
        elif quiet:
            print_texts(result)
        else:
            print_result(result, stdout_console())
    finally:
        # The engine stops after the results are out: its shutdown takes seconds.
        with engine_output(quiet):
            result.close()


def _model_key_completion(modality: str) -> Callable[[str], list[tuple[str, str]]]:
    """Shell completion for ``-m``: the registry's keys for this modality, with their checkpoint.

    It runs on every <TAB>, so it reads the registry only (no vllm, torch or transformers).
    """

    def complete(incomplete: str) -> list[tuple[str, str]]:
        from mmrun.plugins import get_registry

        return [
            (spec.key, spec.repo_id)
            for spec in get_registry().specs(modality)
            if spec.key.startswith(incomplete)
        ]

    return complete


def make_command(modality: str) -> Callable[..., None]:
    noun = modality
    source_flag = f"--{noun}"
    short = {"image": "-i", "audio": "-a"}[modality]
    count_flag = {"image": "--num-images", "audio": "--num-audios"}[modality]

    @error_boundary
    def command(
        key: Annotated[
            str | None,
            typer.Option(
                "--model-type",
                "-m",
                help="Model key (see `mmrun models`). Default: the modality's seed default.",
                show_default=False,
                autocompletion=_model_key_completion(modality),
            ),
        ] = None,
        sources: Annotated[
            list[str] | None,
            typer.Option(
                source_flag,
                short,
                help=f"An {noun} file: local path, http(s) URL or data: URI. Repeatable.",
                show_default=False,
            ),
        ] = None,
        count: Annotated[
            int | None,
            typer.Option(
                count_flag,
                "-n",
                help=f"Number of default {noun}s per prompt (the seed's assets).",
                show_default=False,
            ),
        ] = None,
        per_prompt: Annotated[
            int | None,
            typer.Option(
                "--per-prompt",
                help=f"Split the named {noun}s into prompts of this many each "
                f"(e.g. 256 files, --per-prompt 4: 64 prompts in one batch).",
                min=1,
                show_default=False,
            ),
        ] = None,
        question: o.QuestionOpt = None,
        method: o.MethodOpt = "generate",
        num_prompts: o.NumPromptsOpt = 1,
        seed: o.SeedOpt = None,
        max_tokens: o.MaxTokensOpt = None,
        temperature: o.TemperatureOpt = None,
        model: o.ModelOpt = None,
        tensor_parallel_size: o.TensorParallelOpt = None,
        engine_arg: o.EngineArgOpt = None,
        sampling_arg: o.SamplingArgOpt = None,
        warmup: Annotated[
            int,
            typer.Option(
                "--warmup",
                help="Run the first N prompts once before the timed batch (benchmarks).",
                min=0,
            ),
        ] = 0,
        trust_remote_code: o.TrustRemoteCodeOpt = False,
        dry_run: o.DryRunOpt = False,
        json_out: o.JsonOpt = False,
        verbose: o.VerboseOpt = False,
        quiet: o.QuietOpt = False,
    ) -> None:
        _execute(
            modality,
            sources,
            count,
            per_prompt=per_prompt,
            key=key,
            question=question,
            method=method,
            num_prompts=num_prompts,
            seed=seed,
            max_tokens=max_tokens,
            temperature=temperature,
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            engine_arg=engine_arg,
            sampling_arg=sampling_arg,
            warmup=warmup,
            trust_remote_code=trust_remote_code,
            dry_run=dry_run,
            json_out=json_out,
            verbose=verbose,
            quiet=quiet,
        )

    command.__doc__ = {
        "image": "Run an image-language model on images through vLLM.",
        "audio": "Run an audio-language model on audio clips through vLLM.",
    }[modality]
    command.__name__ = modality
    return command
