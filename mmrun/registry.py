"""The registry of modalities and model loaders.

Importing this module, and registering every built-in loader, imports nothing heavy: no
vllm, torch or transformers. A loader is declared with :func:`loader`, which wraps the
function in a frozen :class:`LoaderSpec`; a plugin's ``register(registry)`` hands its specs
to :meth:`Registry.add`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Literal

from mmrun.errors import PluginError, UnknownModelError
from mmrun.request import LoaderContext, ModelRequest

Method = Literal["generate", "chat"]
LoadFn = Callable[[LoaderContext], ModelRequest]
ALL_METHODS: tuple[Method, ...] = ("generate", "chat")


@dataclass(frozen=True)
class Asset:
    """A default media item: a short name, where it lives, and its file name on a mirror."""

    name: str
    url: str
    mirror_name: str


@dataclass(frozen=True)
class Modality:
    """A kind of media a model takes, with the defaults of its command.

    name: the command and the ``limit_mm_per_prompt`` key ("image", "audio").
    assets: the default media, used in order when the user names none.
    questions: the default question for each number of items; the last one serves larger counts.
    default_count: how many default items one prompt carries when the user says nothing.
    min_count: the fewest items a prompt may carry (0 lets a prompt be text only).
    temperature, max_tokens, seed: the default sampling and engine seed of the seed script.
    default_model: the model key used when ``-m`` is not given.
    """

    name: str
    assets: tuple[Asset, ...]
    questions: Mapping[int, str]
    default_count: int
    min_count: int
    temperature: float
    max_tokens: int
    seed: int | None
    default_model: str

    def question(self, count: int) -> str:
        known = [n for n in sorted(self.questions) if n <= count]
        return self.questions[known[-1] if known else min(self.questions)]


@dataclass(frozen=True)
class LoaderSpec:
    """One model key: the loader and the facts the CLI, the docs and the tests read.

    key: the name users pass to ``-m`` (the seed script's key).
    modality: the modality name ("image", "audio").
    repo_id: the Hugging Face repository the seed runs.
    architecture: the architecture vLLM must support (``config.json``'s ``architectures``,
        or the ``hf_overrides`` the loader sets).
    load: the loader function.
    family: the module (model family) that declares it.
    trust_remote_code: the model runs code from its repository; mmrun refuses without
        ``--trust-remote-code``.
    max_items: the most media items one prompt may carry (None: no model limit).
    min_items: the fewest media items one prompt must carry.
    methods: the ``vllm.LLM`` methods this model can be run with.
    requires: extra Python modules the loader imports (checked before running).
    needs_model: the model has no public default repository; ``--model`` is required.
    max_audio_seconds: the longest audio clip the model takes (None: no model limit);
        mmrun refuses longer clips instead of letting the model cut them silently.
    note: a short remark shown in ``mmrun models`` and the docs.
    """

    key: str
    modality: str
    repo_id: str
    architecture: str
    load: LoadFn
    family: str = ""
    trust_remote_code: bool = False
    max_items: int | None = None
    min_items: int = 0
    methods: tuple[Method, ...] = ALL_METHODS
    requires: tuple[str, ...] = ()
    needs_model: bool = False
    max_audio_seconds: float | None = None
    note: str = ""

    def __call__(self, ctx: LoaderContext) -> ModelRequest:
        return self.load(ctx)


def loader(
    key: str,
    modality: str,
    *,
    repo_id: str,
    architecture: str,
    trust_remote_code: bool = False,
    max_items: int | None = None,
    min_items: int = 0,
    methods: tuple[Method, ...] = ALL_METHODS,
    requires: tuple[str, ...] = (),
    needs_model: bool = False,
    max_audio_seconds: float | None = None,
    note: str = "",
) -> Callable[[LoadFn], LoaderSpec]:
    """Declare a loader: ``@loader("qwen2_vl", "image", repo_id=..., architecture=...)``."""

    def wrap(fn: LoadFn) -> LoaderSpec:
        return LoaderSpec(
            key=key,
            modality=modality,
            repo_id=repo_id,
            architecture=architecture,
            load=fn,
            family=fn.__module__.rsplit(".", 1)[-1],
            trust_remote_code=trust_remote_code,
            max_items=max_items,
            min_items=min_items,
            methods=methods,
            requires=requires,
            needs_model=needs_model,
            max_audio_seconds=max_audio_seconds,
            note=note,
        )

    return wrap


@dataclass
class Registry:
    """Modalities and loaders, keyed by name. Keys are unique within a modality."""

    modalities: dict[str, Modality] = field(default_factory=dict)
    loaders: dict[str, dict[str, LoaderSpec]] = field(default_factory=dict)

    def add_modality(self, modality: Modality) -> None:
        if modality.name in self.modalities:
            raise PluginError(f"modality {modality.name!r} is registered twice")
        self.modalities[modality.name] = modality
        self.loaders.setdefault(modality.name, {})

    def add(self, spec: LoaderSpec) -> None:
        if spec.modality not in self.modalities:
            raise PluginError(
                f"loader {spec.key!r} names unknown modality {spec.modality!r}",
                hint=f"use one of: {', '.join(sorted(self.modalities))}",
            )
        keys = self.loaders[spec.modality]
        if spec.key in keys:
            raise PluginError(
                f"model key {spec.key!r} is registered twice for {spec.modality}",
                hint=f"first by {keys[spec.key].load.__module__}, then by {spec.load.__module__}",
            )
        keys[spec.key] = spec

    def add_module(self, module: ModuleType) -> None:
        """Register every LoaderSpec defined at the top level of a module, in file order."""
        for value in vars(module).values():
            if isinstance(value, LoaderSpec):
                self.add(value)

    def get(self, modality: str, key: str) -> LoaderSpec:
        keys = self.loaders.get(modality, {})
        if key in keys:
            return keys[key]
        close = difflib.get_close_matches(key, list(keys), n=3, cutoff=0.5)
        others = [m for m, specs in self.loaders.items() if m != modality and key in specs]
        if others:
            hint = f"{key!r} is an {others[0]} model: run `mmrun {others[0]} -m {key}`"
        elif close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            hint = f"run `mmrun models {modality}` to list them"
        raise UnknownModelError(f"unknown {modality} model {key!r}", hint=hint)

    def specs(self, modality: str | None = None) -> Iterator[LoaderSpec]:
        names = [modality] if modality else list(self.loaders)
        for name in names:
            yield from self.loaders.get(name, {}).values()
