"""What the user asked for: ``RunOptions``, the one input of ``mmrun.planning.plan``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrun.errors import UsageError
from mmrun.inputs import InputOptions
from mmrun.registry import LoaderSpec, Method


@dataclass(frozen=True)
class RunOptions:
    """What the user asked for; None means "the model's or modality's default"."""

    modality: str
    key: str | None = None
    sources: tuple[str, ...] = ()
    count: int | None = None
    question: str | None = None
    method: Method | None = None  # None: generate, or chat for a checkpoint without a key
    num_prompts: int = 1
    seed: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    model: str | None = None
    tensor_parallel_size: int | None = None
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    sampling_args: Mapping[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    dry_run: bool = False
    per_prompt: int | None = None
    warmup: int = 0
    input: str | None = None
    output: str | None = None
    fail_fast: bool = False
    max_restarts: int = 3
    retry_errors: bool = False
    overwrite: bool = False
    data_parallel_size: int = 1
    backend: str = "local"
    replicas: int | None = None
    # A running vLLM server that answers the prompts (``--server``), and its API key.
    server: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # Structured outputs (at most one): mmrun.structured.from_options reads them.
    json_schema: str | None = None
    choice: tuple[str, ...] = ()
    regex: str | None = None
    grammar: str | None = None
    json_object: bool = False
    input_options: InputOptions = field(default_factory=InputOptions)
    output_format: str | None = None
    # The modality's own options (Modality.options), by name: video's num_frames, fps, ...
    modality_options: Mapping[str, Any] = field(default_factory=dict)
    # Items of other modalities that every prompt carries ahead of its own, by modality
    # (``mmrun video --image photo.jpg``: {"image": ("photo.jpg",)}); see Modality.companions.
    companions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def method_of(opts: RunOptions, spec: LoaderSpec) -> Method:
    """The run's method: the one asked for, else the model's first (generate for a key;
    chat for a checkpoint that runs with its own chat template)."""
    return opts.method or spec.methods[0]


def parse_key_values(pairs: Sequence[str], option: str = "--engine-arg") -> dict[str, Any]:
    """``KEY=VALUE`` pairs; VALUE is read as JSON when it parses (numbers, booleans, objects).

    option: the flag the pairs came from, named in the error message.
    """
    example = "max_model_len=4096" if option == "--engine-arg" else "ignore_eos=true"
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key.isidentifier():
            raise UsageError(
                f"invalid {option} {pair!r}", hint=f"write KEY=VALUE, e.g. {option} {example}"
            )
        try:
            parsed[key] = json.loads(raw)
        except json.JSONDecodeError:
            parsed[key] = raw
    return parsed
