"""A Plan: what will run, as explicit values. ``mmrun.planning.plan`` makes one from what the
user asked for; the runner, the backends and the output file read it; nothing here runs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mmrun.checkpoint import generic_spec
from mmrun.devices import Replica
from mmrun.item import Item
from mmrun.registry import GENERIC_KEY, LoaderSpec, Method, Modality

if TYPE_CHECKING:
    from mmrun.engine.server import ServerTarget
    from mmrun.registry import Registry
    from mmrun.support import VllmInfo


def prompt_seed(seed: int, item_id: str) -> int:
    """A prompt's sampling seed (63 bits) from the run's seed and the prompt's id."""
    digest = hashlib.blake2b(f"{seed}:{item_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


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
class Output:
    """Where a batch's result lines go: ``path`` (None: standard output), ``format`` (jsonl,
    parquet, csv or openai; None: from the path's suffix), and what to do with a file that
    already holds results (resume it, unless ``overwrite``; ``retry_errors`` runs its failed
    prompts again)."""

    path: str | None = None
    format: str | None = None
    overwrite: bool = False
    retry_errors: bool = False


@dataclass(frozen=True)
class Engines:
    """Where the engines run: ``backend`` "local" (one engine in this process, or with
    ``-dp N`` one replica process per ``layout`` entry) or "ray" (``ray_replicas`` engine
    actors on a Ray cluster). ``on_host``: how many engines share this host's cores.
    ``server``: a running vLLM server that answers the prompts instead (``--server URL``)."""

    backend: str = "local"
    layout: tuple[Replica, ...] = ()
    ray_replicas: int | None = None
    on_host: int = 1
    # Restarts of an engine that died, in a row without a result in between (mmrun.restarts).
    max_restarts: int = 3
    server: ServerTarget | None = None

    @property
    def parallel(self) -> bool:
        """Whether the batch runs on several engines (replica processes or Ray)."""
        return bool(self.layout) or self.backend != "local"

    def as_json(self, engine_args: Mapping[str, Any]) -> dict[str, Any]:
        per = int(engine_args.get("tensor_parallel_size") or 1)
        if self.server is not None:
            return {
                "backend": "server",
                "server": self.server.url,
                "replicas": 1,
                "gpus_per_replica": per,
                "layout": [],
            }
        return {
            "backend": self.backend,
            "replicas": len(self.layout) or (self.ray_replicas or 1),
            "gpus_per_replica": per,
            "layout": [r.as_json() for r in self.layout],
        }


@dataclass(frozen=True)
class Plan:
    """What will run.

    question: the run's question (``-q``); None: the modality's default for each prompt's
        count. A prompt's own question (a manifest line's) replaces it.
    count: the media items per prompt, when every prompt carries the same number.
    batch: the run streams one result per prompt and records failures per prompt (a manifest,
        a folder or pattern of media, ``--output``, or several engines), instead of one
        document at the end.
    choices: the engine arguments mmrun chose for this run's size on a GPU, each with why
        ("KEY=VALUE (why)"): shown with --verbose and --dry-run.
    engine_env: environment variables the engine's start needs for those choices (NAME,
        VALUE); one the user set is never among them.
    modality_options: the modality's own settings (video's frames per clip, ...).
    notes: what the user asked for that this run does otherwise, each with why (a value
        lowered to what the method takes, a question the model does not read): shown on
        stderr before anything starts.
    warmup: prompts run untimed before a named run's timed batch.
    model_choice: why mmrun chose the spec, where ``-m`` did not name it (``--model``'s
        config.json named its architecture, or no key describes the checkpoint).
    """

    modality: Modality
    spec: LoaderSpec
    model: str
    method: Method
    items: Items
    engine_args: dict[str, Any]
    sampling: dict[str, Any]
    vllm_version: str | None
    question: str | None = None
    count: int | None = None
    batch: bool = False
    dry_run: bool = False
    warmup: int = 0
    fail_fast: bool = False
    output: Output = field(default_factory=Output)
    engines: Engines = field(default_factory=Engines)
    choices: tuple[str, ...] = ()
    companions: tuple[Companion, ...] = ()
    engine_env: tuple[tuple[str, str], ...] = ()
    modality_options: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    model_choice: str | None = None

    def companion_sources(self) -> dict[str, list[str]] | None:
        """The companions' sources by modality, for the output; None where there are none."""
        return {c.modality.name: list(c.sources) for c in self.companions} or None

    def recipe(self) -> Recipe:
        """What a replica process needs to rebuild this plan (names and plain data)."""
        return Recipe(
            modality=self.modality.name,
            modality_options=dict(self.modality_options),
            key=self.spec.key,
            architecture=self.spec.architecture,
            remote_code=self.spec.trust_remote_code,
            model=self.model,
            method=self.method,
            question=self.question,
            count=self.count,
            max_count=self.items.max_count,
            engine_args=self.engine_args,
            sampling=self.sampling,
            engine_env=self.engine_env,
            companions={c.modality.name: c.sources for c in self.companions},
            on_host=self.engines.on_host,
            max_restarts=self.engines.max_restarts,
        )


@dataclass(frozen=True)
class Recipe:
    """A plan as names and plain data: what crosses to a replica process (a plugin's modality
    may hold functions that do not pickle)."""

    modality: str
    modality_options: dict[str, Any]
    key: str
    architecture: str
    remote_code: bool
    model: str
    method: Method
    question: str | None
    count: int | None
    max_count: int
    engine_args: dict[str, Any]
    sampling: dict[str, Any]
    engine_env: tuple[tuple[str, str], ...]
    companions: dict[str, tuple[str, ...]]
    on_host: int
    max_restarts: int = 3

    def plan(self, registry: Registry, vllm: VllmInfo) -> Plan:
        """The plan of one replica: the coordinator's, with no prompts of its own (they come
        from the coordinator) and one engine."""
        modality = registry.modality(self.modality).with_options(self.modality_options)
        if self.key == GENERIC_KEY:  # a checkpoint without a key: its spec is the plan's own
            spec = generic_spec(modality, self.model, self.architecture, self.remote_code)
        else:
            spec = registry.get(self.modality, self.key)
        return Plan(
            modality=modality,
            spec=spec.for_vllm(vllm.version),
            model=self.model,
            method=self.method,
            items=Items([], 0, self.max_count),
            engine_args=dict(self.engine_args),
            sampling=dict(self.sampling),
            vllm_version=vllm.version,
            question=self.question,
            count=self.count,
            batch=True,
            engines=Engines(on_host=self.on_host, max_restarts=self.max_restarts),
            companions=tuple(
                Companion(registry.modality(name), sources)
                for name, sources in self.companions.items()
            ),
            engine_env=self.engine_env,
            modality_options=self.modality_options,
        )
