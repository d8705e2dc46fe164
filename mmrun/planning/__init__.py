"""Planning: what the user asked for (``RunOptions``) into what will run (``Plan``).

``plan`` is pure: no threads, no vLLM, no network. It checks the options against the model's
spec (checks), chooses the prompts and their media (prompts), composes the engine arguments
and the sampling (engine_args) and, on a GPU, adds the defaults of mmrun.engine.gpu.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mmrun import structured
from mmrun.devices import Replica, layout
from mmrun.engine.gpu import apply_gpu_defaults
from mmrun.errors import UsageError
from mmrun.plan import Companion, Engines, Output, Plan
from mmrun.planning.checks import (
    check_allowed,
    check_companions,
    check_model,
    check_numbers,
    check_supported,
    for_installed,
    within_maximum,
)
from mmrun.planning.engine_args import compose_engine_args, compose_sampling
from mmrun.planning.model_choice import choose_spec
from mmrun.planning.options import RunOptions, parse_key_values
from mmrun.planning.prompts import Chosen, choose_prompts, resolved_model
from mmrun.registry import LoaderSpec, Registry
from mmrun.support import VllmInfo

if TYPE_CHECKING:
    from mmrun.engine.server import ServerTarget

__all__ = ["RunOptions", "compose_engine_args", "parse_key_values", "plan"]


def plan(opts: RunOptions, registry: Registry, vllm: VllmInfo, gpus: Sequence[str] = ()) -> Plan:
    """``gpus``: the GPUs visible to this process (only read for ``-dp N`` on a GPU build)."""
    modality = registry.modality(opts.modality).with_options(opts.modality_options)
    check_model(opts, registry)
    choice = choose_spec(opts, modality, registry, vllm)
    spec = for_installed(choice.spec, vllm)
    check_allowed(opts, spec)
    check_numbers(opts, modality)
    companions = check_companions(opts, spec, modality, registry)
    sampling = compose_sampling(spec, modality, opts)
    # A server's own vLLM decides what it runs (--server): the installed one is not asked.
    local = opts.dry_run or opts.server
    vllm_version = vllm.version if local else check_supported(spec, vllm)
    model = resolved_model(opts.model) or spec.repo_id
    chosen = choose_prompts(opts, spec, modality)
    options, notes = within_maximum(modality, chosen.method, opts.modality_options)
    if options != opts.modality_options:
        modality = registry.modality(opts.modality).with_options(options)
    if opts.question is not None and not spec.takes_question:
        notes += (f"{spec.key} takes no question: -q is not read",)
    # Several engines run a batch; a dry run of a command line's prompts stays one document.
    several = (opts.data_parallel_size > 1 or opts.backend != "local") and not opts.dry_run
    batch = opts.input is not None or chosen.expanded or opts.output is not None or several
    _check_combinations(opts, spec, chosen, companions, batch)
    items = chosen.items
    limit = items.max_count if spec.max_items is None else min(items.max_count, spec.max_items)
    engine_args = compose_engine_args(
        spec,
        model=model,
        num_items=max(limit, 0),
        seed=opts.seed if opts.seed is not None else modality.seed,
        tensor_parallel_size=opts.tensor_parallel_size,
        overrides=opts.engine_args,
        engine_key=modality.engine_key,
        engine_keys=registry.engine_keys(),
        companions={c.modality.engine_key: len(c.sources) for c in companions},
    )
    if chosen.json_lines or structured.asks_for_json(sampling.get("structured_outputs")):
        structured.compact_json(engine_args, opts.engine_args)
    choices: tuple[str, ...] = ()
    engine_env: dict[str, str] = {}
    if vllm.device == "gpu":
        choices, engine_env = apply_gpu_defaults(
            engine_args,
            items.total,
            opts.engine_args,
            vllm.version,
            architecture=spec.architecture,
            per_prompt=max(limit, 0),
            engines=max(1, opts.data_parallel_size),
        )
    replicas: tuple[Replica, ...] = ()
    if opts.backend == "local" and opts.data_parallel_size > 1:
        per_replica = int(engine_args.get("tensor_parallel_size") or 1)
        replicas = tuple(layout(opts.data_parallel_size, per_replica, vllm.device, list(gpus)))
    engines = Engines(
        backend=opts.backend,
        layout=replicas,
        ray_replicas=opts.replicas,
        on_host=opts.data_parallel_size,
        max_restarts=opts.max_restarts,
        server=server_target(opts),
    )
    return Plan(
        modality=modality,
        spec=spec,
        model=model,
        method=chosen.method,
        items=items,
        engine_args=engine_args,
        sampling=sampling,
        vllm_version=vllm_version,
        question=opts.question,
        count=chosen.count,
        batch=batch,
        dry_run=opts.dry_run,
        warmup=opts.warmup,
        fail_fast=opts.fail_fast,
        output=Output(opts.output, opts.output_format, opts.overwrite, opts.retry_errors),
        engines=engines,
        choices=choices,
        companions=companions,
        engine_env=tuple(engine_env.items()),
        modality_options=options,
        notes=notes,
        model_choice=choice.note,
    )


def server_target(opts: RunOptions) -> ServerTarget | None:
    """The vLLM server that answers the prompts (``--server``), or None."""
    if not opts.server:
        return None
    from mmrun.engine.server import ServerTarget

    if opts.data_parallel_size > 1 or opts.backend != "local":
        raise UsageError(
            "--server sends the prompts to one vLLM server; -dp and --backend start engines",
            hint="drop -dp/--backend, or drop --server",
        )
    return ServerTarget(opts.server, opts.api_key or None)


def _check_combinations(
    opts: RunOptions,
    spec: LoaderSpec,
    chosen: Chosen,
    companions: tuple[Companion, ...],
    batch: bool,
) -> None:
    """Options that each make sense but not together with these prompts or this model."""
    if chosen.chat_input and companions:
        name = companions[0].modality.name
        raise UsageError(
            f"--{name} adds to mmrun's own prompts, not to an OpenAI batch file's messages",
            hint=f"put the {name} in the messages, or drop --{name}",
        )
    if opts.warmup and batch:
        raise UsageError("--warmup is for timing one batch", hint="drop --warmup")
    if opts.output_format == "openai" and not chosen.chat_input:
        raise UsageError(
            "--output-format openai answers an OpenAI batch file",
            hint="pass one with --input, or drop --output-format",
        )
    if opts.backend == "ray":
        if chosen.chat_input:  # Ray Data's engine stage takes a rendered prompt, not messages
            raise UsageError(
                "--backend ray does not run OpenAI batch files: Ray Data's vLLM stage takes "
                "a rendered prompt, not a line's own chat messages",
                hint="drop --backend ray; -dp N spreads the file over a host's GPUs",
            )
        if chosen.method != "generate":
            raise UsageError(
                "--backend ray runs --method generate", hint="drop --method chat, or use -dp N"
            )
        if spec.lora is not None:
            raise UsageError(
                f"{spec.key} needs its LoRA adapter, which --backend ray does not load",
                hint="use the local backend (-dp N)",
            )
