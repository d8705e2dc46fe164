"""Planning: what the user asked for (RunOptions) into what will run (Plan).

``plan`` is pure: no threads, no vLLM, no network. It checks the options against the
model's spec, chooses each prompt's media, composes the engine arguments and the sampling,
and, for batches, reads the manifest once to check it. It is the one place where the parts
every model shares are added: the model id, ``trust_remote_code``, the per-prompt media
limits, the seed, tensor parallelism and the user's own engine arguments, and, on a GPU, the
defaults of mmrun.engine.gpu.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun import structured, vllm_args
from mmrun.devices import Replica, layout
from mmrun.engine.gpu import apply_gpu_defaults
from mmrun.errors import (
    MissingDependencyError,
    RemoteCodeError,
    UnsupportedModelError,
    UsageError,
)
from mmrun.inputs import InputOptions, Item, expand_sources, open_input
from mmrun.registry import LoaderSpec, Method, Modality, Registry
from mmrun.sampling import check_sampling
from mmrun.support import VllmInfo

if TYPE_CHECKING:
    from mmrun.media import MediaItem

TRUST_REMOTE_CODE_ENV = "MMRUN_TRUST_REMOTE_CODE"
# More prompts than this in one batched call is a typo (an extra zero or three), not a plan:
# refused before mmrun builds per-prompt lists that would exhaust memory.
MAX_NUM_PROMPTS = 100_000


def prompt_seed(seed: int, item_id: str) -> int:
    """A prompt's sampling seed (63 bits) from the run's seed and the prompt's id."""
    digest = hashlib.blake2b(f"{seed}:{item_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True)
class RunOptions:
    """What the user asked for; None means "the model's or modality's default"."""

    modality: str
    key: str | None = None
    sources: tuple[str, ...] = ()
    count: int | None = None
    question: str | None = None
    method: Method = "generate"
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
    retry_errors: bool = False
    overwrite: bool = False
    data_parallel_size: int = 1
    backend: str = "local"
    replicas: int | None = None
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


@dataclass(frozen=True)
class Companion:
    """Items of another modality that every prompt of a run carries ahead of its own (an
    image with each clip): the modality that decodes them, and their sources."""

    modality: Modality
    sources: tuple[str, ...]


class Items:
    """The prompts of a run, iterable more than once: a list, or a manifest read as a
    stream. ``total`` counts them; ``max_count`` is the most media items one carries."""

    def __init__(self, source: Iterable[Item], total: int, max_count: int) -> None:
        self._source = source
        self.total = total
        self.max_count = max_count

    def __iter__(self) -> Iterator[Item]:
        return iter(self._source)


@dataclass(frozen=True)
class Plan:
    """What will run.

    batch: the run streams one result per prompt and records failures per prompt (a manifest,
        a folder or pattern of media, ``--output``, or several engines), instead of one
        document at the end.
    backend, replicas: where the engines run: "local" (one engine in this process, or with
        ``-dp N`` N replica processes, each on its own devices) or "ray" (a Ray cluster).
    count: the media items per prompt, when every prompt carries the same number.
    question: the run's question (``-q``, else the modality's default for ``count``); a
        manifest line's own question replaces it for that prompt.
    """

    options: RunOptions
    modality: Modality
    spec: LoaderSpec
    model: str
    method: Method
    question: str | None
    count: int | None
    items: Items
    engine_args: dict[str, Any]
    sampling: dict[str, Any]
    batch: bool
    vllm_version: str | None
    backend: str = "local"
    replicas: tuple[Replica, ...] = ()
    # The engine arguments mmrun chose for this run's size on a GPU, each with why ("KEY=VALUE
    # (why)"): shown with --verbose and --dry-run.
    choices: tuple[str, ...] = ()
    companions: tuple[Companion, ...] = ()
    # Environment variables the engine's start needs for those choices (NAME, VALUE); one the
    # user set is never among them.
    engine_env: tuple[tuple[str, str], ...] = ()

    def engine_items(self, items: Sequence[Any]) -> tuple[str, list[Any]]:
        """A prompt's media as vLLM takes them: its name for them, and the items (each
        wrapped with its kind, where the row sends them under a name of its own)."""
        kind = self.modality.engine_key
        if not self.spec.media_key:
            return kind, list(items)
        return self.spec.media_key, [{"type": kind, kind: item} for item in items]

    def companion_sources(self) -> dict[str, list[str]] | None:
        """The companions' sources by modality, for the output; None where there are none."""
        return {c.modality.name: list(c.sources) for c in self.companions} or None

    def engines(self) -> dict[str, Any]:
        """Where the engines run, for the dry run and the output file's record."""
        per = int(self.engine_args.get("tensor_parallel_size") or 1)
        count = len(self.replicas) or (self.options.replicas or 1)
        return {
            "backend": self.backend,
            "replicas": count,
            "gpus_per_replica": per,
            "layout": [r.as_json() for r in self.replicas],
        }

    def recipe(self) -> Recipe:
        """What a replica process needs to rebuild this plan (names and plain data)."""
        return Recipe(
            options=self.options,
            modality=self.modality.name,
            key=self.spec.key,
            model=self.model,
            method=self.method,
            question=self.question,
            count=self.count,
            max_count=self.items.max_count,
            engine_args=self.engine_args,
            sampling=self.sampling,
            vllm_version=self.vllm_version,
            engine_env=self.engine_env,
        )

    def seed_for(self, item: Item) -> int | None:
        """The prompt's own sampling seed, drawn from the run's seed and the prompt's id; None
        where the run samples greedily, has no seed, or names one (``--sampling-arg seed=N``).

        vLLM's engine seed alone gives the whole batch one random stream, so a sampled text
        would depend on which prompts ran beside it and when they arrived: a rerun, a resumed
        run or ``-dp N`` would not give the same texts.
        """
        seed = self.engine_args.get("seed")
        sampling = self.sampling_for(item)
        if seed is None or "seed" in sampling or not sampling.get("temperature"):
            return None
        return prompt_seed(int(seed), item.id)

    def sampling_for(self, item: Item) -> dict[str, Any]:
        """The prompt's sampling: the run's, with a manifest line's own settings over it (its
        constraint replaces the run's)."""
        if not item.sampling:
            return self.sampling
        return {**self.sampling, **item.sampling}

    def constraint_for(self, item: Item) -> Mapping[str, Any] | None:
        """The prompt's structured-output constraint (mmrun.structured), if it has one."""
        constraint: Mapping[str, Any] | None = self.sampling_for(item).get("structured_outputs")
        return constraint

    def count_problem(self, item: Item) -> str | None:
        """What is wrong with the number of media items a prompt carries, or None."""
        spec, count = self.spec, len(item.sources)
        low = max(spec.min_items, self.modality.min_count)
        noun = self.modality.name
        if spec.max_items is not None and count > spec.max_items:
            return f"{spec.key} takes at most {spec.max_items} {noun}(s) per prompt, got {count}"
        if count < low:
            return f"{spec.key} needs at least {low} {noun}(s) per prompt, got {count}"
        return None

    def checks_items(self) -> bool:
        """Whether the modality checks each decoded item against this model."""
        return self.modality.item_check(self.spec) is not None

    def media_problem(self, media: Sequence[MediaItem]) -> str | None:
        """The first decoded item that the modality's check refuses for this model, or None."""
        check = self.modality.item_check(self.spec)
        if check is None:
            return None
        for item in media:
            problem = check(item.source, item.info)
            if problem is not None:
                return problem
        return None

    def question_for(self, item: Item) -> str:
        if item.question is not None:
            return item.question
        if self.options.question is not None:
            return self.options.question
        return self.modality.question(
            len(item.sources), tuple(c.modality.name for c in self.companions)
        )


@dataclass(frozen=True)
class Recipe:
    """A plan as names and plain data: what crosses to a replica process (see Plan.recipe)."""

    options: RunOptions
    modality: str
    key: str
    model: str
    method: Method
    question: str | None
    count: int | None
    max_count: int
    engine_args: dict[str, Any]
    sampling: dict[str, Any]
    vllm_version: str | None
    engine_env: tuple[tuple[str, str], ...] = ()


def replica_plan(recipe: Recipe, registry: Registry, vllm: VllmInfo) -> Plan:
    """The plan of one replica of a parallel run: the coordinator's, with no prompts of its
    own (they come from the coordinator) and one engine."""
    modality = registry.modality(recipe.modality).with_options(recipe.options.modality_options)
    return Plan(
        options=recipe.options,
        modality=modality,
        spec=registry.get(recipe.modality, recipe.key),
        model=recipe.model,
        method=recipe.method,
        question=recipe.question,
        count=recipe.count,
        items=Items([], 0, recipe.max_count),
        engine_args=dict(recipe.engine_args),
        sampling=dict(recipe.sampling),
        batch=True,
        vllm_version=vllm.version,
        companions=companions_of(recipe.options, registry),
        engine_env=recipe.engine_env,
    )


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


def plan(opts: RunOptions, registry: Registry, vllm: VllmInfo, gpus: Sequence[str] = ()) -> Plan:
    """``gpus``: the GPUs visible to this process (only read for ``-dp N`` on a GPU build)."""
    modality = registry.modality(opts.modality).with_options(opts.modality_options)
    spec = registry.get(opts.modality, opts.key or modality.default_model)
    check_allowed(opts, spec)
    check_numbers(opts, modality)
    companions = check_companions(opts, spec, modality, registry)
    sampling = compose_sampling(spec, modality, opts)
    vllm_version = vllm.version if opts.dry_run else check_supported(spec, vllm)
    model = resolved_model(opts.model) or spec.repo_id
    sources, expanded = expand_sources(opts.sources, modality)
    # Several engines run a batch; a dry run of a command line's prompts stays one document.
    parallel = (opts.data_parallel_size > 1 or opts.backend != "local") and not opts.dry_run
    batch = opts.input is not None or expanded or opts.output is not None or parallel
    json_lines = False
    method = opts.method
    chat_input = False  # an OpenAI batch file: each line's own messages
    if opts.input is not None:
        if opts.sources:
            raise UsageError(
                f"--input and {modality.option} name the prompts twice",
                hint="put the media in the manifest, or drop --input",
            )
        reader = open_input(opts.input, modality, opts.input_options)
        reader.check()
        json_lines = bool(getattr(reader, "asks_for_json", False))
        items = Items(reader, reader.total, reader.max_count)
        count = None
        chat_input = bool(getattr(reader, "chat", False))
        if chat_input:  # the user's own messages run through LLM.chat
            if "chat" not in spec.methods:
                raise UsageError(
                    f"{spec.key} cannot run chat messages (an OpenAI batch file)",
                    hint="choose a model that runs --method chat (see `mmrun models`)",
                )
            method = "chat"
    else:
        if opts.input_options != InputOptions():
            raise UsageError(
                "--input-format, --columns, --keep-columns, --split, --dataset-config, "
                "--revision, --limit and --shard are for --input",
                hint="add --input FILE, or drop them",
            )
        per_prompt_opts = opts
        if expanded and opts.per_prompt is None:  # a folder or pattern: one file per prompt
            if opts.num_prompts != 1 and opts.num_prompts != len(sources):
                raise UsageError(
                    f"--num-prompts {opts.num_prompts} does not match the {len(sources)} "
                    f"{modality.name} files named, one prompt each",
                    hint="drop --num-prompts; a folder or pattern gives one prompt per file",
                )
            per_prompt_opts = _with(opts, per_prompt=1)
        count, groups = choose_sources(
            _with(per_prompt_opts, sources=tuple(sources)), spec, modality
        )
        listed = [Item(_item_id(groups, i), i, tuple(group)) for i, group in enumerate(groups)]
        items = Items(listed, len(listed), count)
    if chat_input and companions:
        name = companions[0].modality.name
        raise UsageError(
            f"--{name} adds to mmrun's own prompts, not to an OpenAI batch file's messages",
            hint=f"put the {name} in the messages, or drop --{name}",
        )
    if opts.warmup and batch:
        raise UsageError("--warmup is for timing one batch", hint="drop --warmup")
    limit = items.max_count if spec.max_items is None else min(items.max_count, spec.max_items)
    question = opts.question
    if question is None and count is not None:
        question = modality.question(count, tuple(c.modality.name for c in companions))
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
    if json_lines or structured.asks_for_json(sampling.get("structured_outputs")):
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
    if opts.output_format == "openai" and not chat_input:
        raise UsageError(
            "--output-format openai answers an OpenAI batch file",
            hint="pass one with --input, or drop --output-format",
        )
    if opts.backend == "ray":
        if method != "generate":
            raise UsageError(
                "--backend ray runs --method generate", hint="drop --method chat, or use -dp N"
            )
        if spec.lora is not None:
            raise UsageError(
                f"{spec.key} needs its LoRA adapter, which --backend ray does not load",
                hint="use the local backend (-dp N)",
            )
    replicas: tuple[Replica, ...] = ()
    if opts.backend == "local" and opts.data_parallel_size > 1:
        per_replica = int(engine_args.get("tensor_parallel_size") or 1)
        replicas = tuple(layout(opts.data_parallel_size, per_replica, vllm.device, list(gpus)))
    return Plan(
        options=opts,
        modality=modality,
        spec=spec,
        model=model,
        method=method,
        question=question,
        count=count,
        items=items,
        engine_args=engine_args,
        sampling=sampling,
        batch=batch,
        vllm_version=vllm_version,
        backend=opts.backend,
        replicas=replicas,
        choices=choices,
        companions=companions,
        engine_env=tuple(engine_env.items()),
    )


def resolved_model(model: str | None) -> str | None:
    """A local folder as its absolute path (``./ckpt`` and ``ckpt`` are one model to a resumed
    run, from wherever it is started); a Hub repo id as given."""
    if not model:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def _item_id(groups: list[list[str]], index: int) -> str:
    """A prompt's id: its file when each prompt has a file of its own (an id that stays the same
    when files are added to the folder, so a resumed run skips the right ones), else its place."""
    if (
        len(groups) > 1
        and all(len(g) == 1 for g in groups)
        and len({g[0] for g in groups}) == len(groups)
    ):
        return groups[index][0]
    return str(index)


def _with(opts: RunOptions, **changes: Any) -> RunOptions:
    from dataclasses import replace

    return replace(opts, **changes)


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
    vllm_args.check_engine_args(opts.engine_args)


def _count_bounds(
    spec: LoaderSpec, modality: Modality, from_assets: bool
) -> tuple[int, int | None]:
    low = max(spec.min_items, modality.min_count)
    high = spec.max_items
    if from_assets:
        high = len(modality.assets) if high is None else min(high, len(modality.assets))
    return low, high


def _plural(n: int | None, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def choose_sources(
    opts: RunOptions, spec: LoaderSpec, modality: Modality
) -> tuple[int, list[list[str]]]:
    """The number of items per prompt and each prompt's sources."""
    noun = modality.name
    if opts.sources:
        count = len(opts.sources) if opts.per_prompt is None else opts.per_prompt
        if opts.count is not None and opts.count != count:
            raise UsageError(
                f"-n {opts.count} does not match the {count} {noun} sources given",
                hint="drop -n when you name the media",
            )
        low, high = _count_bounds(spec, modality, from_assets=False)
        if high is not None and count > high:
            raise UsageError(
                f"{spec.key} takes at most {_plural(high, noun)} per prompt, got {count}",
                hint=f"give at most {high}",
            )
        if count < low:
            raise UsageError(
                f"{spec.key} needs at least {_plural(low, noun)} per prompt, got {count}",
                hint=f"give at least {low}",
            )
        if opts.per_prompt is None:
            return count, [list(opts.sources)] * opts.num_prompts
        return count, _groups(opts, count, noun)
    low, high = _count_bounds(spec, modality, from_assets=True)
    if high is None:
        raise UsageError(f"`mmrun {noun}` has no default media", hint=f"name {noun} files")
    if opts.count is None:
        count = min(max(modality.default_count, low), high)
    else:
        count = opts.count
        if not low <= count <= high:
            raise UsageError(
                f"-n {count} is out of range for {spec.key}: it takes {low} to {high}",
                hint=f"use -n between {low} and {high}, or name files with {modality.option}",
            )
    names = [asset.name for asset in modality.assets]
    if count == 1 and opts.num_prompts > 1:
        # One item per prompt: vary it across prompts, as the audio seed does, so a batch
        # is not the same request repeated.
        return count, [[names[i % len(names)]] for i in range(opts.num_prompts)]
    return count, [names[:count]] * opts.num_prompts


def _groups(opts: RunOptions, count: int, noun: str) -> list[list[str]]:
    """Split the named sources into consecutive groups of ``count``, one group per prompt."""
    total = len(opts.sources)
    if count < 1 or total % count:
        raise UsageError(
            f"--per-prompt {count} does not divide the {total} {noun} sources given",
            hint=f"give a multiple of {count} sources",
        )
    groups = [list(opts.sources[i : i + count]) for i in range(0, total, count)]
    if opts.num_prompts not in (1, len(groups)):
        raise UsageError(
            f"--num-prompts {opts.num_prompts} does not match the {len(groups)} prompts "
            f"that --per-prompt {count} makes",
            hint="drop --num-prompts with --per-prompt",
        )
    return groups


def check_allowed(opts: RunOptions, spec: LoaderSpec) -> None:
    if opts.method not in spec.methods:
        raise UsageError(
            f"{spec.key} cannot run with --method {opts.method}",
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
    assert info.version is not None
    return info.version
