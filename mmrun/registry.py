"""The registry: modalities, model loaders, and which plugin registered each.

Importing this module, and registering every built-in loader, imports nothing heavy: no
vllm, torch or transformers. A loader is declared with :func:`loader`, which wraps the
function in a frozen :class:`LoaderSpec`; a modality is a :class:`Modality`. A plugin's hook
hands them to the :class:`Registrar` it receives (the contract: mmrun.plugins).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Literal, TypeVar

from mmrun.errors import PluginError, UnknownModelError
from mmrun.request import LoaderContext, LoraAdapter, Prompt

_T = TypeVar("_T")
Method = Literal["generate", "chat"]
LoadFn = Callable[[LoaderContext], Prompt]
ALL_METHODS: tuple[Method, ...] = ("generate", "chat")
# What a modality's decoder returns: the decoded item, and facts about it for the output
# ({"width", "height"} for images, {"duration_s", "sample_rate"} for audio, ...).
Decoded = tuple[Any, dict[str, Any]]
# A check of one decoded item against a model: (its source, its info) -> what is wrong, or None.
ItemCheck = Callable[[str, Mapping[str, Any]], str | None]
# Where a row's request comes from (LoaderSpec.source; docs/models.md's "source" column):
# vLLM's multi-image or audio example as mmrun first took it (the original example), unless
# vLLM's current examples added the row or changed it since, or only its single-image and video
# example has the key. tools/upstream.py pins those examples' vLLM version, and
# tests/golden/test_upstream_parity.py checks the rows' sources against them.
ORIGINAL_EXAMPLE = "original example"
UPSTREAM = "upstream"
CHANGED_UPSTREAM = "original example, changed upstream"
SINGLE_IMAGE = "single-image and video example"
# ``-m auto``: the checkpoint that ``--model`` names, with its own chat template, whatever its
# architecture (mmrun.checkpoint builds its spec at plan time); no loader may take this key.
GENERIC_KEY = "auto"


@dataclass(frozen=True)
class Asset:
    """A default media item.

    name: its short name (what ``-i``/``-a`` accept, and the output shows).
    url: where it is fetched from.
    mirror_name: its file name on a mirror (``MMRUN_ASSETS_BASE_URL``); the download cache
        keys it by this name, so a change of source never fetches the same file again.
    fallbacks: URLs tried in order when ``url`` fails.
    make: writes the item into the path it is given, for an item mmrun makes itself rather
        than downloads (``url`` empty): made once, at first use, and cached under
        ``mirror_name`` like a download, so that it needs no network.
    """

    name: str
    url: str
    mirror_name: str
    fallbacks: tuple[str, ...] = ()
    make: Callable[[Path], None] | None = None


def _as_is(item: Any, spec: LoaderSpec) -> Any:
    return item


def _describe(info: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in info.items())


def _no_check(spec: LoaderSpec) -> ItemCheck | None:
    return None


def _no_objects(value: Any, label: str) -> Decoded | None:
    return None


def openai_url(part: Mapping[str, Any]) -> str | None:
    """The source an OpenAI content part names, ``{"type": T, T: {"url": ...}}`` or
    ``{"type": T, T: "..."}`` (a URL, a data URI or a path); None where it names none."""
    kind = part.get("type")
    payload = part.get(kind) if isinstance(kind, str) else None
    if isinstance(payload, Mapping):
        url = payload.get("url")
        return url if isinstance(url, str) and url else None
    return payload if isinstance(payload, str) and payload else None


@dataclass(frozen=True)
class MediaOption:
    """An option of one modality's own command (``mmrun video --num-frames 8``).

    name: its keyword (``num_frames``), as the modality's ``configure`` receives it.
    flag: the command-line option (``--num-frames``).
    kind: ``int`` or ``float``.
    help: its one-line help.
    default: its value when not given (None: the model's or the processor's own).
    minimum: the smallest value it takes.
    maximum: the largest value a ``--method`` takes, by method, where there is one (video's
        frames of a chat request: what vLLM's video loader reads); a larger value is lowered
        to it, with ``maximum_note`` (why) on stderr.
    """

    name: str
    flag: str
    kind: type[int] | type[float]
    help: str
    default: int | float | None = None
    minimum: int | float = 1
    maximum: Mapping[str, int | float] = field(default_factory=dict)
    maximum_note: str = ""


def _unconfigured(modality: Modality, values: Mapping[str, Any]) -> Modality:
    return modality


@dataclass(frozen=True)
class Modality:
    """A kind of media, with its command, its defaults and how its media reach vLLM.

    name: the command (``mmrun <name>``), the media option (``--<name>``) and vLLM's key for
        this kind of media (``multi_modal_data`` and ``limit_mm_per_prompt``).
    assets: the default media, used in order when the user names none.
    questions: the default question for each number of items; the last one serves larger counts.
    default_count: how many default items one prompt carries when the user says nothing.
    min_count: the fewest items a prompt may carry (0 lets a prompt be text only).
    temperature, max_tokens, seed: the default sampling and engine seed of vLLM's example.
    default_model: the model key used when ``-m`` is not given.
    decode: ``(bytes, label) -> (item, info)``; raises :class:`mmrun.errors.MediaError`.
    chat_part: one decoded item as an ``LLM.chat`` content part, for a model's spec.
    short_option: the one-letter media option (``-i``).
    extensions: the file suffixes a folder or glob pattern given as a source expands to.
    to_engine: one decoded item as vLLM's ``multi_modal_data`` takes it, for a model's spec
        (images are resized where the spec says so); the item itself by default.
    describe: a few words about an item's ``info`` for the terminal output.
    item_check: the check of each decoded item against a model (audio: a clip no longer than
        the model takes), or None where the model needs none; a failed item is refused with
        the check's message before it reaches the engine.
    write_samples: writes a few small files of this kind into a folder and returns their
        paths (what ``mmrun selftest`` runs its tiny model on); None where there is none.
    summary: the command's one-line help; examples: command lines for its help epilog.
    vllm_modality: the kind of media vLLM receives, where it is not ``name`` (a "document"
        modality whose pages reach the model as images says "image").
    decode_file: ``(path, label) -> (item, info)`` for a modality that decodes a local or
        downloaded file in place, without its bytes being read into memory first (video seeks
        to the frames it needs); ``decode`` still takes data: URIs. None: ``decode`` only.
    options: the command's own options (video: frames per clip, frame rate, pixels per frame).
    configure: ``(modality, values) -> modality``: the modality as a run with these option
        values uses it (video binds its frame sampling into its decoder); unchanged by default.
    companions: other modalities whose items a prompt of this command may carry ahead of its
        own, for the models that take them together (video: an image with the clip, vLLM's
        "image+video"); the command gets their media options (``mmrun video --image``).
    companion_questions: the default question of a prompt that carries a companion's items,
        by the companion's name.
    media_field: the name of its media field in a manifest line, in ``--columns`` and among a
        WebDataset sample's fields, where it is not ``name``.
    column_names: the table columns taken as its media when ``--columns`` names none
        (compared case-blind; image: "img", "photo", ...); the media field alone by default.
    feature_type: the ``datasets`` feature type of a column of its media ("Image"), by which
        a table's media column is found before any name; empty: none.
    openai_parts: the content part types that carry its media in an OpenAI batch line (audio:
        "input_audio", "audio_url"); a line of one modality's run that carries another's
        parts is refused.
    openai_source: ``part -> source``: the URL, data URI or path one of those parts names,
        None where it names none; ``openai_url`` by default.
    from_object: ``(value, label) -> (item, info)``: media given as a Python object (the
        Python API: a PIL image, an array of pixels, samples or frames) as ``decode`` would
        have returned them; None for a value that is not one item of this modality (a list is
        then taken as several items); raises :class:`mmrun.errors.UsageError` (one line) for
        one it takes but cannot use (a wrong shape or element type). By default none is taken.
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
    decode: Callable[[bytes, str], Decoded]
    chat_part: Callable[[Any, LoaderSpec], dict[str, Any]]
    short_option: str
    extensions: tuple[str, ...] = ()
    to_engine: Callable[[Any, LoaderSpec], Any] = _as_is
    describe: Callable[[Mapping[str, Any]], str] = _describe
    item_check: Callable[[LoaderSpec], ItemCheck | None] = _no_check
    write_samples: Callable[[Path], list[str]] | None = None
    summary: str = ""
    examples: tuple[str, ...] = ()
    vllm_modality: str = ""
    decode_file: Callable[[str, str], Decoded] | None = None
    options: tuple[MediaOption, ...] = ()
    configure: Callable[[Modality, Mapping[str, Any]], Modality] = _unconfigured
    companions: tuple[str, ...] = ()
    companion_questions: Mapping[str, str] = field(default_factory=dict)
    media_field: str = ""
    column_names: tuple[str, ...] = ()
    feature_type: str = ""
    openai_parts: tuple[str, ...] = ()
    openai_source: Callable[[Mapping[str, Any]], str | None] = openai_url
    from_object: Callable[[Any, str], Decoded | None] = _no_objects

    def with_options(self, values: Mapping[str, Any]) -> Modality:
        """This modality configured by a run's option values (defaults where missing)."""
        return self.configure(self, self.option_values(values)) if self.options else self

    def option_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every option of this modality's command with the run's value, or its default."""
        return {
            o.name: values[o.name] if values.get(o.name) is not None else o.default
            for o in self.options
        }

    @property
    def engine_key(self) -> str:
        """vLLM's name for this kind of media (``multi_modal_data``, ``limit_mm_per_prompt``)."""
        return self.vllm_modality or self.name

    @property
    def field_name(self) -> str:
        """Its media field in a manifest line, in ``--columns`` and in a WebDataset sample."""
        return self.media_field or self.name

    @property
    def option(self) -> str:
        return f"--{self.name}"

    @property
    def count_option(self) -> str:
        return f"--num-{self.name}s"

    def question(self, count: int, companions: tuple[str, ...] = ()) -> str:
        """The default question for ``count`` items, with the items of ``companions``."""
        for name in companions:
            if name in self.companion_questions:
                return self.companion_questions[name]
        known = [n for n in sorted(self.questions) if n <= count]
        return self.questions[known[-1] if known else min(self.questions)]


def version_key(version: str) -> tuple[int, ...]:
    """A vLLM version as comparable numbers: "0.34.0+cpu" -> (0, 34, 0); "0.33" -> (0, 33)."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    if found is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in found.group().split("."))


def _at_least(version: str, floor: str) -> bool:
    have, need = version_key(version), version_key(floor)
    return have[: len(need)] >= need


@dataclass(frozen=True)
class Since:
    """How a row's request changes from a vLLM version on, as that version's example sets it.

    version: the first vLLM version ("0.34") the change is for.
    engine_args, sampling: set over the row's own; drop_engine_args, drop_sampling: removed.
    trust_remote_code: the row's value from that version on (None: unchanged).
    reason: why, in a few words (shown in the docs).
    """

    version: str
    reason: str
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    drop_engine_args: tuple[str, ...] = ()
    sampling: Mapping[str, Any] = field(default_factory=dict)
    drop_sampling: tuple[str, ...] = ()
    trust_remote_code: bool | None = None


@dataclass(frozen=True)
class LoaderSpec:
    """One model key: the loader and the facts the CLI, the docs and the tests read.

    key: the name users pass to ``-m`` (the key in vLLM's example).
    modality: the modality name ("image", "audio", ...).
    repo_id: the Hugging Face repository vLLM's example runs.
    architecture: the architecture vLLM must support (``config.json``'s ``architectures``,
        or the ``hf_overrides`` the loader sets).
    load: the loader function; it builds the prompt side of a request.
    family: the module (model family) that declares it.
    engine_args: the model's own ``vllm.LLM`` arguments (max_model_len, max_num_seqs,
        mm_processor_kwargs, hf_overrides, ...), without model, trust_remote_code or
        limit_mm_per_prompt, which mmrun adds from the spec and the command line.
    sampling: the model's own sampling defaults (``SamplingParams`` fields); the user's
        ``--temperature``, ``--max-tokens`` and ``--sampling-arg`` override them.
    chat_template: a chat template for ``LLM.chat`` (models that ship none).
    lora: the LoRA adapter every prompt must use.
    media_options: the modality's own settings for this model, read by the modality's hooks
        (image: an ``ImageResize`` applied before the images reach vLLM; audio: an
        ``AudioLimits`` with the longest clip the model takes).
    reads_media: the loader encodes the decoded media itself (voxtral): it is called for each
        prompt with that prompt's media, instead of once per question and item count.
    trust_remote_code: the model runs code from its repository; mmrun refuses without
        ``--trust-remote-code``.
    max_items: the most media items one prompt may carry (None: no model limit).
    min_items: the fewest media items one prompt must carry.
    media_key: vLLM's name for this row's media where it is not the modality's: its items are
        then sent as ``{"type": <modality's>, <modality's>: item}`` ("vision_chunk": Kimi K2.5
        takes its images as vision chunks); empty: the modality's.
    companions: the other modalities of which a prompt may carry one item ahead of its own
        (video rows: "image", where vLLM's example runs the model on an image and a video in
        one prompt); the loader reads how many from ``LoaderContext.companions``.
    methods: the ``vllm.LLM`` methods this model can be run with.
    requires: extra Python modules the loader imports (checked before running).
    needs_model: the model has no public default repository; ``--model`` is required.
    takes_question: the prompt carries the question; False for a model whose prompt is fixed
        (a transcriber's task header): its output says it takes none, and ``-q`` gets a note.
    note: a short remark shown in ``mmrun models`` and the docs.
    source: where the request comes from, for the docs: ``ORIGINAL_EXAMPLE`` (the default),
        ``UPSTREAM``, ``CHANGED_UPSTREAM``, ``SINGLE_IMAGE``, or a plugin's own words.
    since: the first vLLM version that has the row's architecture ("0.34"); None: any.
    until: the last vLLM version that has it ("0.33"); None: no last one known.
    changes: how the request differs from a vLLM version on (see :meth:`for_vllm`).
    """

    key: str
    modality: str
    repo_id: str
    architecture: str
    load: LoadFn
    family: str = ""
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    sampling: Mapping[str, Any] = field(default_factory=dict)
    chat_template: str | None = None
    lora: LoraAdapter | None = None
    media_options: Any = None
    reads_media: bool = False
    trust_remote_code: bool = False
    max_items: int | None = None
    min_items: int = 0
    media_key: str = ""
    companions: tuple[str, ...] = ()
    methods: tuple[Method, ...] = ALL_METHODS
    requires: tuple[str, ...] = ()
    needs_model: bool = False
    takes_question: bool = True
    note: str = ""
    source: str = ORIGINAL_EXAMPLE
    since: str | None = None
    until: str | None = None
    changes: tuple[Since, ...] = ()

    def runs_on(self, version: str) -> bool:
        """Whether this vLLM version has the row's architecture, as the row declares it."""
        if self.since is not None and not _at_least(version, self.since):
            return False
        return self.until is None or not _at_least(version, next_release(self.until))

    def for_vllm(self, version: str | None) -> LoaderSpec:
        """The row as this vLLM version's example has it: each change whose version it has
        reached, applied in order. None (vLLM not installed): the row as declared."""
        spec = self
        if version is None:
            return spec
        for change in self.changes:
            if not _at_least(version, change.version):
                continue
            engine = {k: v for k, v in spec.engine_args.items() if k not in change.drop_engine_args}
            sampling = {k: v for k, v in spec.sampling.items() if k not in change.drop_sampling}
            remote = change.trust_remote_code
            spec = dataclasses.replace(
                spec,
                engine_args=engine | dict(change.engine_args),
                sampling=sampling | dict(change.sampling),
                trust_remote_code=spec.trust_remote_code if remote is None else remote,
            )
        return spec

    def __post_init__(self) -> None:
        # Frozen all the way down: a spec is shared by every run in the process.
        object.__setattr__(self, "engine_args", MappingProxyType(dict(self.engine_args)))
        object.__setattr__(self, "sampling", MappingProxyType(dict(self.sampling)))

    def __call__(self, ctx: LoaderContext) -> Prompt:
        return self.load(ctx)


def next_release(version: str) -> str:
    """The first version after every release of ``version``'s line: "0.33" -> "0.34"."""
    parts = list(version_key(version))
    parts[-1] += 1
    return ".".join(map(str, parts))


def loader(key: str, modality: str, **fields: Any) -> Callable[[LoadFn], LoaderSpec]:
    """Declare a loader: ``@loader("qwen2_vl", "image", repo_id=..., architecture=...,
    engine_args={"max_model_len": 4096})`` over a function ``(LoaderContext) -> Prompt``.
    ``fields``: any of LoaderSpec's fields but ``load`` and ``family``, by name."""

    def wrap(fn: LoadFn) -> LoaderSpec:
        family = fn.__module__.rsplit(".", 1)[-1]
        return LoaderSpec(key=key, modality=modality, load=fn, family=family, **fields)

    return wrap


@dataclass
class Registry:
    """Modalities and loaders, keyed by name (keys are unique within a modality), and the
    plugin that registered each."""

    modalities: dict[str, Modality] = field(default_factory=dict)
    loaders: dict[str, dict[str, LoaderSpec]] = field(default_factory=dict)
    # plugin name -> what it registered, in order ("image" for a modality, "image/llava")
    origins: dict[str, list[str]] = field(default_factory=dict)

    def copy(self) -> Registry:
        return Registry(
            modalities=dict(self.modalities),
            loaders={m: dict(specs) for m, specs in self.loaders.items()},
            origins={p: list(names) for p, names in self.origins.items()},
        )

    def registrar(self, plugin: str) -> Registrar:
        """What the hook of the plugin named ``plugin`` registers through."""
        return Registrar(self, plugin)

    def add_modality(self, modality: Modality, plugin: str) -> None:
        if modality.name in self.modalities:
            raise PluginError(f"modality {modality.name!r} is registered twice")
        self.modalities[modality.name] = modality
        self.loaders.setdefault(modality.name, {})
        self.origins.setdefault(plugin, []).append(modality.name)

    def add_loader(self, spec: LoaderSpec, plugin: str) -> None:
        if spec.modality not in self.modalities:
            raise PluginError(
                f"loader {spec.key!r} names unknown modality {spec.modality!r}",
                hint=f"use one of: {', '.join(sorted(self.modalities))}",
            )
        keys = self.loaders[spec.modality]
        if spec.key == GENERIC_KEY:
            raise PluginError(
                f"model key {GENERIC_KEY!r} is mmrun's own (a checkpoint without a key)",
                hint=f"register {spec.load.__module__}'s loader under another key",
            )
        if spec.key in keys:
            raise PluginError(
                f"model key {spec.key!r} is registered twice for {spec.modality}",
                hint=f"first by {keys[spec.key].load.__module__}, then by {spec.load.__module__}",
            )
        keys[spec.key] = spec
        self.origins.setdefault(plugin, []).append(f"{spec.modality}/{spec.key}")

    def plugin_of(self, spec: LoaderSpec) -> str | None:
        name = f"{spec.modality}/{spec.key}"
        return next((p for p, names in self.origins.items() if name in names), None)

    def modality(self, name: str) -> Modality:
        if name not in self.modalities:
            raise UnknownModelError(
                f"unknown modality {name!r}", hint=f"use one of: {', '.join(self.modalities)}"
            )
        return self.modalities[name]

    def get(self, modality: str, key: str) -> LoaderSpec:
        keys = self.loaders.get(modality, {})
        if key in keys:
            return keys[key]
        close = difflib.get_close_matches(key, list(keys), n=3, cutoff=0.5)
        others = [m for m, specs in self.loaders.items() if m != modality and key in specs]
        if others:
            article = "an" if others[0][:1] in "aeiou" else "a"
            hint = f"{key!r} is {article} {others[0]} model: run `mmrun {others[0]} -m {key}`"
        elif close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            hint = f"run `mmrun models {modality}` to list them"
        raise UnknownModelError(f"unknown {modality} model {key!r}", hint=hint)

    def engine_keys(self) -> tuple[str, ...]:
        """The kinds of media vLLM receives from the registered modalities, in order."""
        return tuple(dict.fromkeys(m.engine_key for m in self.modalities.values()))

    def specs(self, modality: str | None = None) -> Iterator[LoaderSpec]:
        names = [modality] if modality else list(self.loaders)
        for name in names:
            yield from self.loaders.get(name, {}).values()


class Registrar:
    """The ``register`` object a plugin's hook receives (see mmrun.plugins.Register): each
    call adds to the registry on behalf of one plugin."""

    def __init__(self, registry: Registry, plugin: str) -> None:
        self._registry = registry
        self._plugin = plugin

    def modality(self, modality: Modality) -> None:
        self._registry.add_modality(_checked(modality, Modality, "modality"), self._plugin)

    def model(self, spec: LoaderSpec) -> None:
        self._registry.add_loader(_checked(spec, LoaderSpec, "model"), self._plugin)

    def models(self, module: ModuleType) -> None:
        for value in vars(_checked(module, ModuleType, "models")).values():
            if isinstance(value, LoaderSpec):
                self._registry.add_loader(value, self._plugin)


def _checked(item: object, kind: type[_T], call: str) -> _T:
    """``item``, if it is a ``kind``: a plugin that passes something else hears which call took
    what (mypy tells its author earlier)."""
    if not isinstance(item, kind):
        raise PluginError(
            f"register.{call}() was given {type(item).__name__!r}",
            hint=f"pass a {kind.__name__}",
        )
    return item
