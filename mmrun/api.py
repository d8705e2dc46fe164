"""mmrun as a library (docs/python.md): the request mmrun would send (``request_for``), and a
model whose engine starts once and answers any number of calls (``Model``).

Both go through the same planning, request builder and engine loop as the command line; a
``Model``'s results are the command line's ``mmrun.batch/2`` lines as typed objects. Nothing
here imports vLLM, torch or transformers until an engine starts.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from mmrun.errors import UsageError
from mmrun.item import Item
from mmrun.restarts import EngineLost

if TYPE_CHECKING:
    from mmrun.batch import Batch
    from mmrun.outcome import Hooks, Outcome, Sink, Stats
    from mmrun.plan import Plan
    from mmrun.planning import RunOptions
    from mmrun.registry import Modality, Registry
    from mmrun.runner import Runner
    from mmrun.runner import RunResult as RunResult


class SavesImage(Protocol):
    """A PIL image (anything with PIL's ``save(fp, format=...)``)."""

    def save(self, fp: Any, format: str | None = None, **params: Any) -> None: ...


class Array(Protocol):
    """A numpy array: an image's pixels, an audio clip's samples or a clip's frames."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...


Source = str | Path
# A media item: a path, URL or data: URI, or the media themselves: an encoded file's bytes,
# a PIL image, an array of pixels or frames, samples or frames with their rate (a tuple).
MediaItem = Source | bytes | SavesImage | Array | tuple[Any, float]
Media = MediaItem | Sequence[MediaItem]
ItemLike = Item | Source | Mapping[str, Any]

# What a call may set of RunOptions: the model, the engine, the sampling and the constraint
# (inputs, outputs and engines elsewhere are the command line's).
OPTIONS = frozenset(
    {
        "count",
        "method",
        "seed",
        "max_tokens",
        "temperature",
        "model",
        "tensor_parallel_size",
        "engine_args",
        "sampling_args",
        "trust_remote_code",
        "json_schema",
        "choice",
        "regex",
        "grammar",
        "json_object",
        "modality_options",
        "companions",
        # Where the engines run (the command line's -dp, --backend, --replicas, --server,
        # --api-key, --max-restarts): in this process unless one of them says otherwise.
        "data_parallel_size",
        "backend",
        "replicas",
        "server",
        "api_key",
        "max_restarts",
    }
)
BACKENDS = ("local", "ray")
CONSTRAINTS = ("json_schema", "choice", "regex", "grammar", "json_object")


@dataclass(frozen=True)
class Request:
    """The request mmrun would send for one prompt (what ``--dry-run --json`` shows);
    ``to_dict()`` is that ``mmrun.result/1`` document."""

    key: str
    modality: str
    model: str
    method: str
    question: str
    prompt: str | None
    prompt_token_ids: tuple[int, ...] | None
    stop_token_ids: tuple[int, ...]
    engine_args: Mapping[str, Any]
    sampling: Mapping[str, Any]
    media: tuple[Mapping[str, Any], ...]
    document: Mapping[str, Any] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.document))


@dataclass(frozen=True)
class ResultError:
    """Why a prompt failed: ``stage`` media, request, engine or output (docs/usage.md)."""

    stage: str
    message: str


@dataclass(frozen=True)
class Result:
    """One prompt's result; ``to_dict()`` is the command line's ``mmrun.batch/2`` line."""

    id: str
    index: int
    media: tuple[str, ...]
    question: str
    text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    parsed: Any
    meta: Mapping[str, Any] | None
    error: ResultError | None
    line: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.line))

    @classmethod
    def of(cls, outcome: Outcome) -> Result:
        from mmrun.records import line

        return cls.from_line(line(outcome, finished_at=time.time()))

    @classmethod
    def from_line(cls, row: Mapping[str, Any]) -> Result:
        """The result of an ``mmrun.batch/2`` line."""
        error = row["error"]
        return cls(
            id=row["id"],
            index=row["index"],
            media=tuple(row["media"]),
            question=row["question"],
            text=row["text"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            finish_reason=row["finish_reason"],
            parsed=row["parsed"],
            meta=row["meta"],
            error=None if error is None else ResultError(error["stage"], error["message"]),
            line=dict(row),
        )


def open_batch(plan: Plan) -> Batch:
    """A batch of ``plan`` (a command line's, as ``mmrun.planning.plan`` made it), its output
    file opened and resumed: ``run`` gives its prompts to the plan's backend (one engine
    here, ``-dp N`` replicas, Ray or a server) and each result line to a callback, as
    ``Model.write`` does with its model's engine."""
    from mmrun.batch import Batch

    return Batch(plan)


def run_plan(plan: Plan, hooks: Hooks | None = None) -> tuple[RunResult, Any]:
    """A plan's prompts named on the command line, every one answered or an error raised
    (a dry run starts no engine). The result, and the engine still running (the caller
    shows the results, then closes it), or None."""
    from mmrun.runner import run_named
    from mmrun.templates import HFTemplateRenderer

    return run_named(plan, HFTemplateRenderer, hooks)


def request_for(
    key: str,
    question: str | None = None,
    media: Media = (),
    *,
    modality: str | None = None,
    **options: Any,
) -> Request:
    """The request mmrun would send to vLLM for ``key`` (a key of ``mmrun models``; of its
    first modality unless ``modality`` names one), a question and media (paths, URLs, data:
    URIs, a file's bytes or the media as Python objects; none: vLLM's example's); no engine
    starts.
    ``options``: RunOptions' model, engine, sampling and constraint fields (``max_tokens``,
    ``json_schema``, ``engine_args``, ...)."""
    from mmrun.planning import plan
    from mmrun.plugins import get_registry
    from mmrun.support import vllm_info

    registry = get_registry()
    name = _modality_of(registry, key, modality)
    held: list[str] = []
    try:
        configured = registry.modality(name).with_options(options.get("modality_options") or {})
        given = _media(media, "media", configured, held)
        opts = _options(name, key, tuple(g.source for g in given), question, options, dry_run=True)
        the_plan = plan(opts, registry, vllm_info())
        if the_plan.batch:
            raise UsageError(
                "request_for() describes one prompt, not a folder or pattern of media",
                hint="name the media of one prompt",
            )
        _rehold(given, the_plan.modality)
        result, _ = run_plan(the_plan)
    finally:
        _release(held)
    from mmrun.records import document

    doc = document(result)
    prompt = result.prompt
    return Request(
        key=the_plan.spec.key,
        modality=name,
        model=the_plan.model,
        method=the_plan.method,
        question=result.question,
        prompt=prompt.text if prompt is not None else None,
        prompt_token_ids=(
            tuple(prompt.token_ids) if prompt is not None and prompt.token_ids else None
        ),
        stop_token_ids=tuple(doc["request"]["stop_token_ids"]),
        engine_args=doc["request"]["engine_args"],
        sampling=doc["request"]["sampling"],
        media=tuple(doc["media"]),
        document=doc,
    )


class Model:
    """A model whose vLLM engine starts once (on ``open()`` or ``with``) and answers any
    number of ``ask`` and ``run`` calls; ``close()`` stops the engine and its processes.

    ``options``: RunOptions' model and engine fields (``model`` a checkpoint,
    ``engine_args``, ``tensor_parallel_size``, ``method``, ``trust_remote_code``, ``count``
    the most media items one prompt carries) and the default sampling of every call.
    """

    def __init__(
        self,
        key: str,
        *,
        modality: str | None = None,
        hooks: Hooks | None = None,
        **options: Any,
    ) -> None:
        from mmrun import structured
        from mmrun.plan import Items
        from mmrun.planning import plan
        from mmrun.plugins import get_registry
        from mmrun.support import vllm_info

        registry = get_registry()
        name = _modality_of(registry, key, modality)
        opts = _options(name, key, (), None, options, dry_run=False)
        base = plan(opts, registry, vllm_info(), _gpus(opts))
        # A call may ask for JSON: the engine leaves no free whitespace, as for such a run.
        structured.compact_json(base.engine_args, opts.engine_args)
        self.plan: Plan = dataclasses.replace(
            base, items=Items([], 0, base.items.max_count), batch=True
        )
        self.modality: Modality = self.plan.modality
        self._hooks = hooks
        self._runner: Runner | None = None
        self._engine: Any = None
        self._lora: Any = None
        self._resolver: Any = None
        self._busy = False
        self._died = False
        # -dp N replicas or Ray: each call starts its engines and stops them at its end.
        self._spread = bool(self.plan.engines.layout) or self.plan.engines.backend != "local"
        self._opened = False

    def open(self) -> Model:
        """Start the engine (once); the model itself. With ``data_parallel_size`` or
        ``backend="ray"``, each call starts the engines it runs on."""
        if self._spread:
            self._opened = True
            return self
        if self._engine is not None:
            return self
        from mmrun.engine import configure_environment
        from mmrun.engine.output import engine_output
        from mmrun.runner import Runner, lora_for
        from mmrun.templates import HFTemplateRenderer

        configure_environment(False)
        runner = Runner(self.plan, HFTemplateRenderer, self._hooks)
        runner.builder.resolve_companions(runner.hooks)
        with engine_output(quiet=True):
            self._engine = runner.start(None, abort_on_media=False)
        self._runner = runner
        self._resolver = runner.resolver()
        self._lora = lora_for(self.plan)
        return self

    def close(self) -> None:
        """Stop the engine; its processes end and its memory is returned."""
        self._opened = False
        engine, self._engine = self._engine, None
        resolver, self._resolver = self._resolver, None
        if resolver is not None:
            resolver.close()
        if engine is not None:
            from mmrun.engine.output import engine_output

            with engine_output(quiet=True):
                engine.close()

    def __enter__(self) -> Model:
        return self.open()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def timings(self) -> dict[str, float]:
        """The engine start's timings (seconds), once open."""
        return dict(self._runner.timings) if self._runner is not None else {}

    def ask(self, question: str | None = None, media: Media = (), **sampling: Any) -> Result:
        """One prompt: ``question`` (None: the modality's default) about ``media``."""
        held: list[str] = []
        try:  # a mistake in the call's own media or question raises
            item = _row_item(
                {self.modality.field_name: media, "question": question}, 0, self.modality, held
            )
        except BaseException:
            _release(held)
            raise
        (result,) = self._run([item], sampling, held)
        return result

    def run(self, items: Iterable[ItemLike], **sampling: Any) -> Iterator[Result]:
        """Each item's result, in the order they finish. An item: a media source, an
        ``Item``, or a manifest line as a dict (``id``, the media field, ``question``,
        ``meta``, ``sampling``, ``json_schema``, ``choice``, ``regex``). ``sampling``: vLLM's
        sampling settings for this call, and at most one constraint (``json_schema``,
        ``choice``, ``regex``, ``grammar``, ``json_object``). An item that cannot run is a
        result with an error; the others are answered."""
        return self._run(items, sampling, [])

    def _run(
        self, items: Iterable[ItemLike], sampling: Mapping[str, Any], held: list[str]
    ) -> Iterator[Result]:
        """``run``, the media objects of the call held under ``held``'s sources until it ends."""
        try:
            runner = self._ready()
            own = _call_sampling(sampling)
        except BaseException:
            _release(held)
            raise
        stream = (_item(x, i, self.modality, held) for i, x in enumerate(items))
        call = {**self.plan.sampling, **(own or {})}
        if runner is None:
            plan = dataclasses.replace(self.plan, sampling=call)
            return _results(self._spread_outcomes(plan, stream, held))
        return _results(self._outcomes(runner, stream, call, held))

    def write(
        self,
        items: Iterable[ItemLike],
        path: str | Path,
        *,
        overwrite: bool = False,
        retry_errors: bool = False,
        **sampling: Any,
    ) -> list[Result]:
        """``run`` into a results file, as ``-o`` does: each line written as it finishes, a
        file that holds results already resumed (its prompts skipped; ``retry_errors`` runs
        its failed ones again; ``overwrite`` starts anew), a .parquet or .csv table written
        at the end. The results of the prompts this call ran, their lines as written."""
        held: list[str] = []
        try:
            return self._write(items, path, overwrite, retry_errors, sampling, held)
        finally:
            _release(held)  # the objects of prompts the file held already

    def _write(
        self,
        items: Iterable[ItemLike],
        path: str | Path,
        overwrite: bool,
        retry_errors: bool,
        sampling: Mapping[str, Any],
        held: list[str],
    ) -> list[Result]:
        from mmrun.outcome import Hooks
        from mmrun.plan import Items, Output

        runner = self._ready()
        own = _call_sampling(sampling)
        listed = [_item(x, i, self.modality, held) for i, x in enumerate(items)]
        seen: set[str] = set()
        for item in listed:
            if item.id in seen:
                raise UsageError(f"id {item.id!r} is used twice", hint="give each item its own id")
            seen.add(item.id)
        call = {**self.plan.sampling, **(own or {})}
        plan = dataclasses.replace(
            self.plan,
            items=Items(listed, len(listed), self.plan.items.max_count),
            sampling=call,
            output=Output(str(path), None, overwrite, retry_errors),
        )
        batch = open_batch(plan)
        results: list[Result] = []
        try:
            batch.run(
                lambda _outcome, _row, written: results.append(Result.from_line(written)),
                self._hooks or Hooks(),
                backend=None if runner is None else _Loaded(self, runner, call),
                quiet=True,
            )
        finally:
            batch.close()
            batch.stop_engines()
        batch.export()
        return results

    def _ready(self) -> Runner | None:
        """The runner of the model's engine; None where each call starts its own engines."""
        if self._spread:
            if not self._opened:
                raise UsageError("the model is not open", hint="use `with Model(...) as model:`")
            self._check_idle()
            return None
        if self._died and self._runner is not None:  # the engine died during an earlier call
            from mmrun.engine.output import engine_output

            with engine_output(quiet=True):
                self._engine = self._runner.start(None, abort_on_media=False, again=True)
            self._died = False
        if self._engine is None or self._runner is None:
            raise UsageError("the model is not open", hint="use `with Model(...) as model:`")
        self._check_idle()
        return self._runner

    def _check_idle(self) -> None:
        if self._busy:
            raise UsageError(
                "a run() of this model is still being read",
                hint="read it to the end (or close it) before the next call",
            )

    def _spread_outcomes(
        self, plan: Plan, stream: Iterator[Item], held: list[str]
    ) -> Generator[Outcome, None, None]:
        """A call on engines of its own (-dp N replicas, Ray), each outcome as it comes: the
        backend runs in a thread, and stops taking prompts when the caller stops reading."""
        from mmrun.backends import backend_for
        from mmrun.outcome import Hooks

        self._check_idle()
        self._busy = True
        feed = _Feed(stream)
        backend = backend_for(plan, quiet=True)
        worker = _Worker(lambda emit: backend.run(iter(feed), emit, self._hooks or Hooks()))
        try:
            yield from worker.outcomes()
        finally:
            feed.stop()
            worker.join()
            backend.close()
            self._busy = False
            _release(held)

    def _outcomes(
        self,
        runner: Runner,
        stream: Iterator[Item],
        sampling: dict[str, Any],
        held: list[str] | None = None,
    ) -> Generator[Outcome, None, None]:
        from mmrun.media import prefetch_budget
        from mmrun.prefetch import MediaPipeline

        self._ready()
        self._busy = True
        # The call's sampling is the run's, as flags on the command line would make it.
        runner.builder.use_sampling(sampling)
        window = runner.window()
        pipeline = MediaPipeline(
            iter(stream),
            self._resolver,
            ahead=2 * window,
            budget=prefetch_budget(),
            checks=runner.builder.checks(),
        )
        pipeline.keep_futures = False
        outcomes = runner.outcomes(self._engine, pipeline, lora=self._lora, window=window)
        try:
            yield from outcomes
        except EngineLost as lost:  # this call fails; the next one starts a new engine
            engine, self._engine = self._engine, None
            self._died = True
            if engine is not None:
                engine.close()
            raise lost.error from None
        finally:
            outcomes.close()
            # Prompts a caller stopped reading for are still in the engine: their results
            # must not reach the next call.
            while self._engine is not None and self._engine.in_flight > 0:
                self._engine.poll()
            runner.builder.use_sampling(self.plan.sampling)
            self._busy = False
            _release(held or ())  # objects of prompts the caller stopped reading for


def _results(outcomes: Generator[Outcome, None, None]) -> Iterator[Result]:
    try:
        for outcome in outcomes:
            yield Result.of(outcome)
    finally:
        outcomes.close()  # a caller who stops reading ends the call's prompts now


class _Feed:
    """A call's items, handed to a backend until the caller stops reading."""

    def __init__(self, items: Iterator[Item]) -> None:
        self._items = items
        self._stopped = False

    def __iter__(self) -> Iterator[Item]:
        for item in self._items:
            if self._stopped:
                return
            yield item

    def stop(self) -> None:
        self._stopped = True


class _Worker:
    """A backend's run in a thread of its own; its outcomes read here as they come."""

    _END = object()

    def __init__(self, run: Callable[[Sink], Any]) -> None:
        import queue
        import threading

        self._box: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._error: list[BaseException] = []
        self._run = run
        self._thread = threading.Thread(target=self._work, name="mmrun-backend", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._run(self._box.put)
        except BaseException as exc:  # raised in the caller's thread
            self._error.append(exc)
        finally:
            self._box.put(self._END)

    def outcomes(self) -> Iterator[Outcome]:
        while (got := self._box.get()) is not self._END:
            yield got
        if self._error:
            raise self._error[0]

    def join(self) -> None:
        """Wait for the backend's end, dropping the outcomes no one reads any more."""
        while self._thread.is_alive():
            self._thread.join(timeout=0.1)
            while not self._box.empty():
                self._box.get()


class _Loaded:
    """A model's engine as the backend of a batch (``Model.write``): it stays up after."""

    name = "local"

    def __init__(self, model: Model, runner: Runner, sampling: dict[str, Any]) -> None:
        self._model = model
        self._runner = runner
        self._sampling = sampling

    def run(self, items: Iterator[Item], emit: Sink, hooks: Hooks) -> Stats:
        from mmrun.outcome import Stats

        stats = Stats()
        for outcome in self._model._outcomes(self._runner, items, self._sampling):
            stats.record(outcome)
            emit(outcome)
        return stats

    def close(self) -> None:
        """The engine is the model's: it stops when the model closes."""


def _modality_of(registry: Registry, key: str, modality: str | None) -> str:
    from mmrun.registry import GENERIC_KEY

    if key == GENERIC_KEY:  # the checkpoint model= names, with its own chat template
        if modality is None:
            raise UsageError(
                f"{key!r} runs a checkpoint on one kind of media", hint="pass modality="
            )
        registry.modality(modality)
        return modality
    if modality is not None:
        registry.get(modality, key)  # an unknown key: its one-line error
        return modality
    # A key of several modalities (qwen2_5_vl: image and video) is the first's, as the
    # registry lists them; ``modality=`` names another.
    found = [name for name, specs in registry.loaders.items() if key in specs]
    if found:
        return found[0]
    for name in registry.modalities:
        registry.get(name, key)  # the first modality's error names the closest keys
    raise UsageError(f"unknown model {key!r}", hint="run `mmrun models` to list them")


def _options(
    modality: str,
    key: str,
    sources: tuple[str, ...],
    question: str | None,
    options: Mapping[str, Any],
    *,
    dry_run: bool,
) -> RunOptions:
    from mmrun.planning import RunOptions

    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise UsageError(
            f"unknown option {unknown[0]!r}", hint=f"use one of: {', '.join(sorted(OPTIONS))}"
        )
    given = dict(options)
    if given.get("backend", "local") not in BACKENDS:
        raise UsageError(
            f"unknown backend {given['backend']!r}", hint=f"use one of: {', '.join(BACKENDS)}"
        )
    if "choice" in given:
        given["choice"] = tuple(given["choice"])
    if "companions" in given:
        given["companions"] = {k: tuple(v) for k, v in given["companions"].items()}
    return RunOptions(
        modality=modality,
        key=key,
        sources=sources,
        question=question,
        dry_run=dry_run,
        **given,
    )


def _gpus(opts: RunOptions) -> list[str]:
    """The GPUs visible to this process, where ``data_parallel_size`` splits them."""
    from mmrun.devices import visible_gpus

    return visible_gpus() if opts.data_parallel_size > 1 else []


class _Given(NamedTuple):
    """One media item of a call: its source, the name its result lists, and the object it
    was given as (None: a path, URL or bytes)."""

    source: str
    name: str
    value: Any = None


def _media(media: Any, where: str, modality: Modality, held: list[str]) -> list[_Given]:
    """Each media item's source and the name its result lists: a path or URL is both; an
    encoded file's bytes become a data: URI, and an object the modality takes (a PIL image, an
    array of pixels, samples or frames) its decoded item, held under a source of its own
    (mmrun.media.objects; the source is added to ``held``), each named by its place
    (``where``). A list is several items, unless the modality takes it as one (a clip's
    frames). UsageError (one line) for what is no media."""
    whole = (
        None
        if isinstance(media, str | Path | bytes | bytearray)
        else _held(media, where, modality, held)
    )
    if whole is not None:
        return [whole]
    if isinstance(media, str | Path | bytes | bytearray):
        media = [media]
    elif not isinstance(media, Sequence):
        raise UsageError(
            f"{where} is an object of type {type(media).__name__}", hint=_hint(modality)
        )
    named = []
    for i, value in enumerate(media):
        name = f"{where}[{i}]" if len(media) > 1 else where
        if isinstance(value, str | Path):
            named.append(_Given(str(value), str(value)))
        elif isinstance(value, bytes | bytearray):
            named.append(_Given(_data_uri(bytes(value), name), name))
        else:
            given = _held(value, name, modality, held)
            if given is None:
                raise UsageError(
                    f"{name} is an object of type {type(value).__name__}", hint=_hint(modality)
                )
            named.append(given)
    return named


def _held(value: Any, name: str, modality: Modality, held: list[str]) -> _Given | None:
    """An object the modality takes as one item, decoded and held; None for any other."""
    from mmrun.media import objects

    decoded = modality.from_object(value, name)
    if decoded is None:
        return None
    source = objects.hold(*decoded, name)
    held.append(source)
    return _Given(source, name, value)


def _rehold(given: Iterable[_Given], modality: Modality) -> None:
    """The objects decoded again as the plan's modality takes them (its options as the
    method lowers them: a chat request's frames), under the same sources."""
    from mmrun.media import objects

    for item in given:
        if item.value is not None:
            decoded = modality.from_object(item.value, item.name)
            assert decoded is not None  # the modality took it once already
            objects.hold(*decoded, item.name, source=item.source)


def _data_uri(data: bytes, name: str) -> str:
    from mmrun.media.inline import sniff

    kind = sniff(data)
    if kind is None:
        raise UsageError(
            f"{name}: {len(data):,} bytes of no image, audio or video format mmrun knows"
        )
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


def _hint(modality: Modality) -> str:
    return (
        "give a path, URL, data: URI or a file's bytes; docs/python.md lists the objects "
        f"that {modality.name} media may also be"
    )


def _call_sampling(sampling: Mapping[str, Any]) -> dict[str, Any] | None:
    """A call's own sampling settings and constraint, checked as a manifest line's are."""
    from mmrun import structured
    from mmrun.sampling import check_sampling

    settings = {k: v for k, v in sampling.items() if k not in CONSTRAINTS}
    check_sampling(settings, "sampling")
    if "structured_outputs" in settings:
        settings["structured_outputs"] = structured.from_sampling_arg(
            settings["structured_outputs"], "sampling structured_outputs"
        )
    flags = {k: sampling[k] for k in CONSTRAINTS if k in sampling}
    if "json_schema" in flags and not isinstance(flags["json_schema"], str):
        if len(flags) > 1:
            raise UsageError(
                f"{' and '.join(flags)} both constrain the answer", hint="give one of them"
            )
        constraint: dict[str, Any] | None = {
            "json": structured.check_schema(flags["json_schema"], "json_schema")
        }
    else:
        constraint = structured.from_options(**flags)
    if constraint is not None:
        if "structured_outputs" in settings:
            raise UsageError(
                "structured_outputs and a constraint both constrain the answer",
                hint="give one of them",
            )
        settings["structured_outputs"] = constraint
    return settings or None


def _release(held: Iterable[str]) -> None:
    from mmrun.media import objects

    objects.release(held)


def _item(value: ItemLike, index: int, modality: Modality, held: list[str]) -> Item:
    """An item of a call; one that cannot be read is an item with its problem (its result
    is an error)."""
    if isinstance(value, Item):
        return value
    if isinstance(value, str | Path):
        return Item(str(value), index, (str(value),))
    if not isinstance(value, Mapping):
        return Item(
            str(index),
            index,
            (),
            problem=f"an item is a media source, an Item or a dict, not {type(value).__name__}",
        )
    try:
        return _row_item(value, index, modality, held)
    except UsageError as exc:
        ident = value.get("id", index)
        return Item(str(ident), index, (), problem=str(exc))


def _row_item(row: Mapping[str, Any], index: int, modality: Modality, held: list[str]) -> Item:
    from mmrun import structured
    from mmrun.sampling import check_sampling

    where = f"item {index}"
    name = modality.field_name
    allowed = {"id", name, "question", "meta", "sampling", *structured.LINE_FIELDS}
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise UsageError(f"{where} has unknown field {unknown[0]!r}")
    media = _media(row.get(name, []), f"{where} {name}", modality, held)
    ident = row.get("id", index)
    question = row.get("question")
    if question is not None and not isinstance(question, str):
        raise UsageError(f"{where}: 'question' must be a string")
    meta = row.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        raise UsageError(f"{where}: 'meta' must be a dict")
    settings = dict(row.get("sampling") or {})
    check_sampling(settings, f"{where}: sampling")
    if "structured_outputs" in settings:
        settings["structured_outputs"] = structured.from_sampling_arg(
            settings["structured_outputs"], f"{where}: sampling structured_outputs"
        )
    constraint = structured.from_line(row, where, Path.cwd())
    if constraint is not None:
        settings["structured_outputs"] = constraint
    sampling = settings or None
    return Item(
        str(ident),
        index,
        tuple(given.source for given in media),
        question,
        dict(meta) if meta is not None else None,
        names=tuple(g.name for g in media) if any(g.source != g.name for g in media) else None,
        sampling=sampling,
    )
