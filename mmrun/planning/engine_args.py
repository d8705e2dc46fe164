"""The engine's arguments and the sampling of a run: the model's own, the parts every model
shares (the model id, ``trust_remote_code``, the per-prompt media limits, the seed, tensor
parallelism) and the user's flags over them."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from mmrun import structured
from mmrun.errors import UsageError
from mmrun.planning.options import RunOptions
from mmrun.registry import LoaderSpec, Modality


def compose_engine_args(
    spec: LoaderSpec,
    *,
    model: str,
    num_items: int,
    seed: int | None,
    tensor_parallel_size: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    engine_key: str | None = None,
    engine_keys: Sequence[str] = (),
    companions: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The keyword arguments for ``vllm.LLM``, in a stable order. ``engine_key``: vLLM's name
    for the model's kind of media, where the modality's differs from it. ``engine_keys``: every
    kind of media the registered modalities give vLLM; those the model is not asked to take
    get a limit of 0, so vLLM reserves no memory for them. ``companions``: the items of other
    kinds each prompt carries too (vLLM's name -> how many)."""
    args: dict[str, Any] = {"model": model}
    if spec.trust_remote_code:
        args["trust_remote_code"] = True
    args.update(copy.deepcopy(dict(spec.engine_args)))  # nested values: this run's own
    limits = {name: 0 for name in engine_keys}
    limits[spec.media_key or engine_key or spec.modality] = num_items
    limits.update(companions or {})
    args["limit_mm_per_prompt"] = limits
    if seed is not None:
        args["seed"] = seed
    if tensor_parallel_size is not None:
        args["tensor_parallel_size"] = tensor_parallel_size
    args.update(overrides or {})
    return args


def compose_sampling(spec: LoaderSpec, modality: Modality, opts: RunOptions) -> dict[str, Any]:
    """Sampling: the modality's defaults, then the model's own, then the user's flags; the
    constraint of structured outputs, checked, under ``structured_outputs``."""
    constraint = structured.from_options(
        json_schema=opts.json_schema,
        choice=opts.choice,
        regex=opts.regex,
        grammar=opts.grammar,
        json_object=opts.json_object,
    )
    sampling: dict[str, Any] = {
        "temperature": modality.temperature,
        "max_tokens": modality.max_tokens,
        **spec.sampling,
    }
    if opts.temperature is not None:
        sampling["temperature"] = opts.temperature
    if opts.max_tokens is not None:
        sampling["max_tokens"] = opts.max_tokens
    sampling.update(opts.sampling_args)
    if "structured_outputs" in opts.sampling_args:
        if constraint is not None:
            raise UsageError(
                "--sampling-arg structured_outputs and "
                f"{structured.FLAGS[next(iter(constraint))]} both constrain the answer",
                hint="give one of them",
            )
        constraint = structured.from_sampling_arg(opts.sampling_args["structured_outputs"])
    if constraint is not None:
        sampling["structured_outputs"] = constraint
    return sampling
