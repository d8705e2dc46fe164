"""The checks a run's options must pass before anything starts: the model may run (method,
remote code, checkpoint, packages) on the installed vLLM, the numbers are in range, the
companion items fit the model."""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmrun import vllm_args
from mmrun.errors import (
    MissingDependencyError,
    RemoteCodeError,
    UnsupportedModelError,
    UsageError,
)
from mmrun.inputs import expand_sources
from mmrun.plan import Companion
from mmrun.planning.options import RunOptions, method_of
from mmrun.registry import LoaderSpec, Modality, Registry, next_release
from mmrun.sampling import check_sampling
from mmrun.support import VllmInfo

TRUST_REMOTE_CODE_ENV = "MMRUN_TRUST_REMOTE_CODE"
# More prompts than this in one batched call is a typo (an extra zero or three), not a plan:
# refused before mmrun builds per-prompt lists that would exhaust memory.
MAX_NUM_PROMPTS = 100_000


def check_model(opts: RunOptions, registry: Registry) -> None:
    """``--model`` names a checkpoint: a local folder or file that is there, or a Hub repo id.
    A value that reads as a path and is not there, or one of mmrun's keys (meant for ``-m``),
    would otherwise go to the Hub, and fail there (or run the wrong model) after the engine
    start; both are refused before anything starts."""
    model = opts.model
    if not model or _exists(Path(model).expanduser()):
        return
    if model.startswith((".", "/", "~")):
        raise UsageError(
            f"--model {model}: no such file or folder",
            hint="check the path, or give a Hugging Face repo id, ORG/NAME",
        )
    owners = [name for name, specs in registry.loaders.items() if model in specs]
    if model == opts.key and opts.modality in owners:
        spec = registry.get(opts.modality, model)
        if spec.needs_model:  # its repo id is a placeholder: no checkpoint of that name
            raise UsageError(
                f"--model {model}: no such folder here, and {model} has no public checkpoint",
                hint="give --model the checkpoint's local folder or its Hugging Face repo id",
            )
    if owners:
        command = "" if opts.modality in owners else f"mmrun {owners[0]} "
        raise UsageError(
            f"--model {model!r} is an mmrun key, not a checkpoint",
            hint=f"use {command}-m {model}",
        )


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # no permission, a NUL byte: not a path that is there
        return False


def check_allowed(opts: RunOptions, spec: LoaderSpec) -> None:
    if method_of(opts, spec) not in spec.methods:
        raise UsageError(
            f"{spec.key} cannot run with --method {method_of(opts, spec)}",
            hint=f"use --method {' or '.join(spec.methods)}",
        )
    allowed = opts.trust_remote_code or os.environ.get(TRUST_REMOTE_CODE_ENV) == "1"
    if spec.trust_remote_code and not allowed:
        raise RemoteCodeError(
            f"{spec.key} runs Python code from the model repository {opts.model or spec.repo_id}",
            hint=f"pass --trust-remote-code (or set {TRUST_REMOTE_CODE_ENV}=1) if you trust it",
        )
    if spec.needs_model and not opts.model:
        raise UsageError(
            f"{spec.key} has no public checkpoint", hint="pass --model <path or repo id>"
        )
    for module in spec.requires:
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError(
                f"{spec.key} needs the Python package {module!r}",
                hint=f"pip install {module.replace('_', '-')}",
            )


def check_supported(spec: LoaderSpec, info: VllmInfo) -> str:
    if not info.installed:
        raise MissingDependencyError(
            "vLLM is not installed", hint="run `make install` (CPU) or `pip install vllm` (GPU)"
        )
    if not info.supports(spec.architecture):
        last = info.removed.get(spec.architecture)
        since = f"; vLLM {last} and earlier support it" if last else ""
        raise UnsupportedModelError(
            f"the installed vLLM {info.version} does not support {spec.key} "
            f"({spec.architecture}){since}",
            hint=f"pip install 'vllm<={last}'" if last else "upgrade vLLM",
        )
    assert info.version is not None  # an installed vLLM has one
    return info.version


def for_installed(spec: LoaderSpec, info: VllmInfo) -> LoaderSpec:
    """The row as the installed vLLM's example has it; a row the row itself says that version
    lacks is refused here, dry run or not, before anything starts."""
    version = info.version
    if version is None:
        return spec
    if not spec.runs_on(version):
        if spec.until is not None:
            raise UnsupportedModelError(
                f"the installed vLLM {version} does not have {spec.key} ({spec.architecture}); "
                f"vLLM {spec.until} is the last that has it",
                hint=f"pip install 'vllm<{next_release(spec.until)}'",
            )
        raise UnsupportedModelError(
            f"the installed vLLM {version} does not have {spec.key} ({spec.architecture}); "
            f"it needs vLLM {spec.since} or later",
            hint=f"pip install 'vllm>={spec.since}'",
        )
    return spec.for_vllm(version)


def check_numbers(opts: RunOptions, modality: Modality) -> None:
    if opts.num_prompts < 1:
        raise UsageError(f"--num-prompts must be at least 1, got {opts.num_prompts}")
    if opts.num_prompts > MAX_NUM_PROMPTS:
        raise UsageError(
            f"--num-prompts {opts.num_prompts} is more than mmrun sends in one call "
            f"({MAX_NUM_PROMPTS:,})",
            hint="put the prompts in a manifest (--input) to run more",
        )
    if opts.temperature is not None and not math.isfinite(opts.temperature):
        raise UsageError(
            f"--temperature must be a finite number, got {opts.temperature}",
            hint="e.g. --temperature 0.7",
        )
    if opts.per_prompt is not None and not opts.sources:
        raise UsageError("--per-prompt needs named media", hint=f"add {modality.option} files")
    if opts.max_restarts < 0:
        raise UsageError(
            f"--max-restarts must be 0 or more, got {opts.max_restarts}",
            hint="0 stops the batch when its engine dies",
        )
    if opts.data_parallel_size < 1:
        raise UsageError(f"-dp must be at least 1, got {opts.data_parallel_size}")
    if opts.backend not in ("local", "ray"):
        raise UsageError(f"unknown --backend {opts.backend!r}", hint="use local or ray")
    if opts.backend == "ray" and opts.data_parallel_size > 1:
        raise UsageError(
            "-dp is for the local backend", hint="with --backend ray, set --replicas instead"
        )
    if opts.replicas is not None and opts.backend != "ray":
        raise UsageError("--replicas is for --backend ray", hint="on one host, use -dp N")
    if opts.retry_errors and opts.output is None:
        raise UsageError("--retry-errors needs the output file of the earlier run", hint="add -o")
    # Before anything starts: a misspelled key or a value vLLM refuses would otherwise be found
    # after a minute or more of engine start (or, for sampling, at the first request).
    check_sampling(opts.sampling_args, "--sampling-arg")
    if opts.sampling_args.get("n", 1) != 1:
        raise UsageError(
            f"--sampling-arg n={opts.sampling_args['n']}: a run samples one answer per prompt",
            hint="give n in a manifest line's sampling or an OpenAI batch line's body: "
            "their result lines list every choice",
        )
    vllm_args.check_engine_args(opts.engine_args)


def within_maximum(
    modality: Modality, method: str, values: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The modality's option values with each one over what ``method`` takes lowered to it,
    and a note for each (``--num-frames 100`` of a chat request: 32, and why)."""
    lowered, notes = dict(values), []
    for option in modality.options:
        most = option.maximum.get(method)
        value = values.get(option.name)
        if most is None or value is None or value <= most:
            continue
        lowered[option.name] = option.kind(most)
        notes.append(
            f"{option.flag} {value} is more than --method {method} takes: using {most} "
            f"({option.maximum_note})"
        )
    return lowered, tuple(notes)


def companions_of(opts: RunOptions, registry: Registry) -> tuple[Companion, ...]:
    """The run's companion items, each with the modality that decodes it."""
    return tuple(
        Companion(registry.modality(name), tuple(sources))
        for name, sources in opts.companions.items()
        if sources
    )


def check_companions(
    opts: RunOptions, spec: LoaderSpec, modality: Modality, registry: Registry
) -> tuple[Companion, ...]:
    """The run's companions, each one the model takes with its own items: one item each (what
    vLLM's example sends), a file, URL or data: URI, not a folder or pattern."""
    companions = companions_of(opts, registry)
    for companion in companions:
        name = companion.modality.name
        if name not in spec.companions:
            takers = [s.key for s in registry.specs(modality.name) if name in s.companions]
            raise UsageError(
                f"{spec.key} takes no {name} with its {modality.name}",
                hint=(
                    f"drop --{name}, or choose a model that takes both: {', '.join(takers)}"
                    if takers
                    else f"drop --{name}"
                ),
            )
        sources, expanded = expand_sources(companion.sources, companion.modality)
        if expanded or len(sources) != 1:
            raise UsageError(
                f"--{name} takes one {name} for every {modality.name} prompt, got "
                f"{'a folder or pattern' if expanded else len(sources)}",
                hint=f"name one {name} file or URL",
            )
        if opts.backend == "ray":
            raise UsageError(
                f"--{name} runs on the local backend", hint="drop --backend ray (use -dp N)"
            )
    return companions
