"""Execution: a plan's prompts -> media -> engine -> outcomes.

The media of the first prompts are fetched and decoded in worker threads while the engine
starts; from then on they stay a bounded window ahead of the engine. The main thread builds
each prompt with the model's loader, submits it, and hands every finished prompt to the
caller's sink as soon as it is done. A run named on the command line and a batch go through
the same loop; they differ in what a failed prompt does (ends the run, or becomes an error
line) and in what the caller does with the outcomes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mmrun.errors import (
    DownloadError,
    EngineError,
    MediaError,
    MmrunError,
    TemplateUnavailableError,
)
from mmrun.hub import check_reachable, lora_path
from mmrun.inputs import Item
from mmrun.inputs.openai_batch import fill_media
from mmrun.media import MediaItem, MediaResolver, ProgressFn, decoded_bytes, prefetch_budget
from mmrun.plan import Plan
from mmrun.request import LoaderContext, Prompt, TemplateRenderer
from mmrun.results import Completion, ItemError, Outcome, RunResult
from mmrun.structured import checked

Sink = Callable[[Outcome], None]
RendererFactory = Callable[[str, bool], TemplateRenderer]


@dataclass
class Hooks:
    """What the caller is told while a run goes on.

    on_request(url): each download; on_progress: download progress; on_engine_start(): just
    before vLLM starts; on_started(total): the engine is up, ``total`` prompts to go.
    """

    on_request: Callable[[str], None] | None = None
    on_progress: ProgressFn | None = None
    on_engine_start: Callable[[], None] | None = None
    on_started: Callable[[int], None] | None = None


@dataclass
class Stats:
    """How a batch went: prompts done and failed in this run, and skipped (done before)."""

    done: int = 0
    failed: int = 0
    skipped: int = 0
    failed_before: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def record(self, outcome: Outcome) -> None:
        """Count one finished prompt: done (with its tokens) or failed."""
        if outcome.error is not None:
            self.failed += 1
            return
        self.done += 1
        if outcome.completion is not None:
            self.prompt_tokens += outcome.completion.prompt_tokens
            self.completion_tokens += outcome.completion.completion_tokens


@dataclass
class _Ready:
    item: Item
    media: list[MediaItem] | None
    error: ItemError | None


_END: Any = object()


class MediaPipeline:
    """The media of a stream of items, resolved by worker threads at most ``ahead`` items in
    front of the consumer, handed out in input order. A source repeated in nearby items is
    resolved once."""

    def __init__(
        self,
        plan: Plan,
        items: Iterator[Item | None],
        resolver: MediaResolver,
        ahead: int,
        known: Mapping[str, Future[MediaItem]] | None = None,
        budget: int | None = None,
    ) -> None:
        """``budget``: bytes the decoded media held ahead may take (a batch); None: no bound
        but ``ahead`` (a named run needs every item anyway)."""
        self._plan = plan
        self._items = items
        self._resolver = resolver
        self._ahead = max(1, ahead)
        self._queue: collections.deque[tuple[Item, list[Future[MediaItem]] | ItemError]] = (
            collections.deque()
        )
        # source text -> its resolution, for the sources of nearby items (all, for a named run)
        self.resolved: collections.OrderedDict[str, Future[MediaItem]] = collections.OrderedDict(
            known or {}
        )
        self._per_item = max(1, plan.items.max_count)
        self._capacity = 2 * self._ahead * self._per_item
        # What the decoded media held ahead may take (MMRUN_PREFETCH_MB): once the first items
        # are decoded, their size bounds how many are resolved ahead. Without it a GPU's
        # window (2 x max_num_seqs = 512 prompts, twice that ahead) of large photos would be
        # gigabytes of pixels.
        self._budget = budget
        self._seen_bytes = 0
        self._seen_items = 0
        self._exhausted = False
        # Every resolution started, while ``keep_futures`` (a batch stops keeping them once
        # the engine has started: they hold decoded media).
        self.futures: list[Future[MediaItem]] = []
        self.keep_futures = True

    def fill(self) -> None:
        """Submit items until ``ahead`` are waiting. The item stream may yield None: nothing
        right now, more may come (a replica waiting on its coordinator)."""
        while not self._exhausted and len(self._queue) < self._limit():
            item = next(self._items, _END)
            if item is _END:
                self._exhausted = True
                return
            if item is None:
                return
            problem = item.problem or self._plan.count_problem(item)
            if problem is not None:
                self._queue.append((item, ItemError("request", problem)))
                continue
            try:
                futures = [self._submit(source) for source in item.sources]
            except MmrunError as exc:  # a source that cannot be fetched at all (bad scheme)
                self._queue.append((item, ItemError("media", str(exc), exc)))
                continue
            self._queue.append((item, futures))

    def _limit(self) -> int:
        """How many items may wait ahead: ``ahead``, fewer when their decoded media would
        exceed the prefetch budget (estimated from the items decoded so far)."""
        if self._budget is None:
            return self._ahead
        seen_items, seen_bytes = self._seen_items, self._seen_bytes
        if not seen_items:  # none handed out yet (the engine is starting): those decoded
            for _, work in self._queue:
                if isinstance(work, list) and work and all(_decoded(f) for f in work):
                    seen_items += 1
                    seen_bytes += sum(decoded_bytes(f.result()) for f in work)
        if not seen_items:  # no size known yet: a few, not a GPU's whole window
            return min(self._ahead, UNSIZED_AHEAD)
        per_item = seen_bytes / seen_items
        return max(2, min(self._ahead, int(self._budget / max(per_item, 1))))

    def _submit(self, source: str) -> Future[MediaItem]:
        future = self.resolved.get(source)
        if future is None or future.cancelled():
            (future,) = self._resolver.submit([source])
            self.resolved[source] = future
            if self.keep_futures:
                self.futures.append(future)
            while len(self.resolved) > min(self._capacity, 2 * self._limit() * self._per_item):
                self.resolved.popitem(last=False)
        else:
            self.resolved.move_to_end(source)
        return future

    def peek(self) -> Item | None:
        """The first item waiting, if any (safe beside ``fill`` in another thread)."""
        with contextlib.suppress(IndexError):
            return self._queue[0][0]
        return None

    def media_of(self, item: Item) -> list[MediaItem]:
        """The resolved media of an item whose sources this pipeline has submitted."""
        return [self.resolved[source].result() for source in item.sources]

    def first_error(self) -> ItemError | None:
        """The first item refused before any resolution started (a malformed source)."""
        return next((work for _, work in self._queue if isinstance(work, ItemError)), None)

    def idle(self) -> None:
        """Nothing in flight and nothing ready: wait a moment for the item stream (a
        replica's coordinator) instead of asking again at once."""
        wait = getattr(self._items, "wait", None)
        if wait is not None:
            wait(0.2)

    def done(self) -> bool:
        self.fill()
        return self._exhausted and not self._queue

    def next(self, block: bool) -> _Ready | None:
        """The first item (in input order) whose media are all resolved or failed; None if
        none is, unless ``block``, or if none is left. An item waiting on a slow download
        does not hold up the ready ones behind it."""
        while True:
            self.fill()
            if not self._queue:
                return None
            for index, (item, work) in enumerate(self._queue):
                if isinstance(work, ItemError) or all(f.done() for f in work):
                    del self._queue[index]
                    self.fill()
                    return self._ready(item, work)
            if not block:
                return None
            waiting = [f for _, work in self._queue if isinstance(work, list) for f in work]
            concurrent.futures.wait(waiting, return_when=concurrent.futures.FIRST_COMPLETED)

    def _ready(self, item: Item, work: list[Future[MediaItem]] | ItemError) -> _Ready:
        if isinstance(work, ItemError):
            return _Ready(item, None, work)
        try:
            media = [f.result() for f in work]
        except (MediaError, DownloadError) as exc:
            return _Ready(item, None, ItemError("media", str(exc), exc))
        self._seen_items += 1
        self._seen_bytes += sum(decoded_bytes(m) for m in media)
        problem = self._plan.media_problem(media)
        if problem is not None:
            return _Ready(item, None, ItemError("media", problem))
        return _Ready(item, media, None)


UNSIZED_AHEAD = 32  # items resolved ahead before any has been decoded


def _decoded(future: Future[MediaItem]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


class Prompts:
    """Each prompt, built by the model's loader: once per question and item count, or, for a
    loader that reads the media, once per prompt."""

    def __init__(self, plan: Plan, renderer: TemplateRenderer) -> None:
        self._plan = plan
        self._renderer = renderer
        self._cache: collections.OrderedDict[tuple[str, int], Prompt] = collections.OrderedDict()
        self._lock = threading.Lock()  # the engine start's warm-up builds the first one

    def build(self, question: str, media: Sequence[Any]) -> Prompt:
        with self._lock:
            return self._build(question, media)

    def _build(self, question: str, media: Sequence[Any]) -> Prompt:
        spec = self._plan.spec
        if spec.reads_media:
            return spec(self._context(question, len(media), [m.data for m in media]))
        key = (question, len(media))
        prompt = self._cache.get(key)
        if prompt is None:
            prompt = spec(self._context(question, len(media), ()))
            self._cache[key] = prompt
            if len(self._cache) > 256:  # per-line questions: keep the recent ones
                self._cache.popitem(last=False)
        return prompt

    def _context(self, question: str, count: int, media: Sequence[Any]) -> LoaderContext:
        return LoaderContext(
            question=question,
            num_items=count,
            model=self._plan.model,
            templates=self._renderer,
            media=media,
            companions={c.modality.name: len(c.sources) for c in self._plan.companions},
        )


def pending_prompt_note(exc: TemplateUnavailableError) -> str:
    return (
        f"not rendered: the model's {exc.source} ({exc.model}) renders the prompt at run time "
        f"and cannot be loaded now ({exc.message.rstrip('.')}). To see it rendered now: "
        f"{exc.hint}"
    )


class Runner:
    """One run of a plan."""

    def __init__(self, plan: Plan, renderers: RendererFactory, hooks: Hooks | None = None):
        self.plan = plan
        self.hooks = hooks or Hooks()
        self.renderer = renderers(plan.model, plan.spec.trust_remote_code)
        self.prompts = Prompts(plan, self.renderer)
        self.timings: dict[str, float] = {}
        # A replica of a parallel run shares the host's cores with the others.
        self.engines_on_host = int(plan.options.data_parallel_size)
        self._t0 = time.perf_counter()
        # The items every prompt carries ahead of its own (an image with each clip), in the
        # form the engine takes them, prepared once by resolve_companions(): chat message
        # parts, or vLLM's name for each kind -> its items.
        self.companion_parts: list[dict[str, Any]] = []
        self.companion_data: dict[str, list[Any]] = {}

    def resolve_companions(self) -> None:
        """Fetch and decode the run's companion items (a few, shared by every prompt), before
        the engine starts: one that cannot be read fails the run in a second. They are made
        ready for the engine (resized where the row says) here, once, not for every prompt."""
        spec = self.plan.spec
        for companion in self.plan.companions:
            modality = companion.modality
            resolver = MediaResolver(modality, self.hooks.on_request, self.hooks.on_progress)
            try:
                media = [f.result() for f in resolver.submit(companion.sources)]
            finally:
                resolver.close()
            if self.plan.method == "chat":
                self.companion_parts += [modality.chat_part(m.data, spec) for m in media]
            else:
                self.companion_data[modality.engine_key] = [
                    modality.to_engine(m.data, spec) for m in media
                ]

    def window(self, replica: bool = False) -> int:
        """How many prompts may be in the engine at once: enough to keep its scheduler full
        (twice what it runs together), few enough that memory stays bounded. A replica of a
        parallel run keeps no more than that, so that prompts go to whichever replica has room."""
        seqs = int(self.plan.engine_args.get("max_num_seqs") or 256)
        return 2 * seqs if replica else max(16, 2 * seqs)

    def start(
        self, resolver: MediaResolver, pipeline: MediaPipeline | None, abort_on_media: bool
    ) -> Any:
        """Start the engine while the first media resolve (those of ``pipeline``); its handle,
        or None for a dry run."""
        if self.plan.options.dry_run:
            return None
        from mmrun import engine

        check_reachable(self.plan.model, "the model")  # vLLM's start asks the Hub next
        if self.hooks.on_engine_start is not None:
            self.hooks.on_engine_start()
        if pipeline is not None:
            pipeline.fill()
        t_start = time.perf_counter()
        abort = threading.Event()
        failed: list[Future[Any]] = []
        if abort_on_media:
            # A mistyped URL is reported in a second, not after the engine has started.
            def check(future: Future[Any]) -> None:
                if not future.cancelled() and future.exception() is not None:
                    failed.append(future)
                    abort.set()

            for future in list(pipeline.futures if pipeline is not None else ()):
                future.add_done_callback(check)
        # While the engine starts, keep resolving ahead as the first sizes become known (a
        # batch's pipeline starts with a few prompts until it knows how large they decode).
        started = threading.Event()
        filler = None
        if pipeline is not None and not abort_on_media:

            def keep_filling() -> None:
                with contextlib.suppress(Exception):  # the run's own fill() reports it
                    while not started.wait(0.25):
                        pipeline.fill()

            filler = threading.Thread(target=keep_filling, name="mmrun-prefetch", daemon=True)
            filler.start()
        try:
            llm = engine.start(
                self.plan.engine_args,
                abort=abort,
                engines_on_host=self.engines_on_host,
                env=self.plan.engine_env,
                # The first prompt loads the model's processor or tokenizer (half a second to
                # seconds): built while the engine starts, not after it is ready.
                warm_up=lambda: self._warm_prompts(pipeline),
                timings=self.timings,
            )
        except engine.StartAborted:
            failed[0].result()  # raises the failure
            raise
        finally:
            started.set()
            if filler is not None:
                filler.join()
        self.timings["engine_start_s"] = time.perf_counter() - t_start
        return engine.Engine(llm)

    def _warm_prompts(self, pipeline: MediaPipeline | None) -> None:
        """Build the prompt of the run's first item (or of one with the most media, for a
        replica, whose items come later), so that the loader's processor or tokenizer is
        loaded. Not for a loader that reads the media (its prompt needs them decoded)."""
        if self.plan.spec.reads_media:
            return
        first = pipeline.peek() if pipeline is not None else None
        if first is None:
            first = Item(id="", index=0, sources=("",) * max(1, self.plan.items.max_count))
        self.prompts.build(self.plan.question_for(first), first.sources)

    def prompt_or_note(
        self, question: str, media: Sequence[Any]
    ) -> tuple[Prompt | None, str | None]:
        """The prompt; for a dry run whose model's processor cannot be loaded now (no network,
        not in the Hugging Face cache), no prompt and a note saying so: a dry run shows
        everything else and needs no network."""
        try:
            return self.prompts.build(question, media), None
        except TemplateUnavailableError as exc:
            if not self.plan.options.dry_run:
                raise
            return None, pending_prompt_note(exc)

    def sampling(
        self,
        stop_token_ids: Sequence[int],
        seed: int | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Any:
        """vLLM's sampling parameters: the run's sampling, or ``sampling`` (a prompt's own)."""
        from mmrun import engine

        sampling = self.plan.sampling if sampling is None else sampling
        extra = {k: v for k, v in sampling.items() if k not in ("temperature", "max_tokens")}
        return engine.sampling_params(
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            stop_token_ids=stop_token_ids,
            seed=seed,
            extra=extra,
        )

    def engine_request(
        self,
        question: str,
        prompt: Prompt,
        media: Sequence[MediaItem],
        messages: Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        """``messages``: the user's own conversation (an OpenAI batch line), whose media parts
        the decoded media replace; None: one user turn with the question and the media."""
        from mmrun import engine

        modality, spec = self.plan.modality, self.plan.spec
        if self.plan.method == "chat":
            parts = [modality.chat_part(m.data, spec) for m in media]
            if messages is not None:
                return fill_media(messages, modality.name, parts)
            ahead = [dict(part) for part in self.companion_parts]  # each prompt's own parts
            return engine.chat_input(question, [*ahead, *parts])
        data = [modality.to_engine(m.data, spec) for m in media]
        return engine.generate_input(prompt, *self.plan.engine_items(data), self.companion_data)

    def drive(
        self,
        llm: Any,
        pipeline: MediaPipeline,
        sink: Sink,
        *,
        lora: Any,
        stop: Callable[[], bool] = lambda: False,
        window: int | None = None,
    ) -> None:
        """Submit every item, keep the engine full, give each outcome to ``sink``.

        Without an engine (dry run) each item is only prepared. ``stop()`` ends the loop early
        (--fail-fast); the prompts still in the engine are then abandoned.
        """
        from mmrun import engine

        in_flight: dict[str, Outcome] = {}
        params_cache: dict[tuple[int, ...], Any] = {}
        window = window or self.window()
        while not stop():
            while len(in_flight) < window and not stop():
                ready = pipeline.next(block=not in_flight)
                if ready is None:
                    break
                question = self.plan.question_for(ready.item)
                outcome = Outcome(item=ready.item, question=question, media=ready.media or ())
                if ready.error is not None:
                    outcome.error = ready.error
                    sink(outcome)
                    continue
                try:
                    outcome.prompt, outcome.prompt_note = self.prompt_or_note(
                        question, outcome.media
                    )
                except MediaError as exc:
                    outcome.error = ItemError("request", str(exc), exc)
                    sink(outcome)
                    continue
                if llm is None or outcome.prompt is None:  # dry run
                    sink(outcome)
                    continue
                stops = outcome.prompt.stop_token_ids
                seed = self.plan.seed_for(outcome.item)
                if seed is not None or outcome.item.sampling:
                    params = self.sampling(stops, seed, self.plan.sampling_for(outcome.item))
                else:
                    if stops not in params_cache:
                        params_cache[stops] = self.sampling(stops)
                    params = params_cache[stops]
                request = self.engine_request(
                    question, outcome.prompt, outcome.media, ready.item.messages
                )
                # The result line needs the sources, not the pixels: the engine has its own
                # copy now, so the decoded data is not held while the prompt runs.
                outcome.media = [dataclasses.replace(m, data=None) for m in outcome.media]
                try:
                    request_id = llm.submit(
                        request,
                        params,
                        lora,
                        chat=self.plan.method == "chat",
                        template=self.plan.spec.chat_template,
                    )
                except engine.RequestRejected as exc:
                    outcome.error = ItemError("request", str(exc))
                    sink(outcome)
                    continue
                in_flight[request_id] = outcome
                # Results are waiting: write them before preparing more requests (a window
                # of 2 x max_num_seqs, 512 by default on a GPU, would otherwise hold the first
                # line back until the whole window is submitted). The engine core keeps working
                # meanwhile; poll() does not wait when results are there.
                if llm.has_output():
                    break
            if not in_flight:
                if pipeline.done() or stop():
                    return
                pipeline.idle()
                continue
            for request_id, result in llm.poll():
                outcome = in_flight.pop(request_id)
                if isinstance(result, Completion):
                    outcome.completion, outcome.error = checked(
                        result, self.plan.constraint_for(outcome.item)
                    )
                else:
                    outcome.error = ItemError("engine", result)
                sink(outcome)


def run_named(
    plan: Plan, renderers: RendererFactory, hooks: Hooks | None = None
) -> tuple[RunResult, Any]:
    """A run named on the command line: every prompt or none. The result, and the engine
    (still running, so that the caller shows the results before stopping it) or None."""
    runner = Runner(plan, renderers, hooks)
    items = list(plan.items)
    resolver = MediaResolver(plan.modality, runner.hooks.on_request, runner.hooks.on_progress)
    handle = None
    try:
        t_media = time.perf_counter()
        pipeline = MediaPipeline(plan, iter(items), resolver, ahead=len(items))
        pipeline.fill()
        refused = pipeline.first_error()
        if refused is not None:
            raise _as_error(refused)
        media_done: list[float] = []
        for future in pipeline.futures:
            future.add_done_callback(lambda _: media_done.append(time.perf_counter()))
        runner.timings["prepare_s"] = time.perf_counter() - runner._t0
        runner.resolve_companions()
        if plan.checks_items():
            # Waited for before the engine starts: an item the model cannot take (a clip too
            # long) fails in a second.
            _raise_first_problem(plan, pipeline.futures)
        handle = runner.start(resolver, pipeline, abort_on_media=True)
        if handle is not None and runner.hooks.on_started is not None:
            runner.hooks.on_started(len(items))
        t_started = time.perf_counter()
        _raise_first_problem(plan, pipeline.futures)
        runner.timings["media_wait_s"] = time.perf_counter() - t_started
        runner.timings["media_s"] = max(media_done, default=t_media) - t_media
        lora = _lora(plan, resolve=not plan.options.dry_run)
        t_render = time.perf_counter()
        question = plan.question_for(items[0])
        prompt, note = runner.prompt_or_note(question, pipeline.media_of(items[0]))
        runner.timings["render_s"] = time.perf_counter() - t_render
        sources = list(dict.fromkeys(s for item in items for s in item.sources))
        result = RunResult(
            plan=plan,
            question=question,
            prompt=prompt,
            lora_path=lora[0],
            media=[pipeline.resolved[s].result() for s in sources],
            media_per_prompt=[[sources.index(s) for s in item.sources] for item in items],
            prompt_note=note,
        )
        if handle is not None:
            result.outputs, result.errors = _generate_all(
                runner, handle, items, pipeline, resolver, lora[1]
            )
        result.timings = dict(runner.timings)
        result.timings["total_s"] = time.perf_counter() - runner._t0
        returned, handle = handle, None
        return result, returned
    finally:
        if handle is not None:  # a failure after the engine had started
            handle.close()
        resolver.close()


def _generate_all(
    runner: Runner,
    handle: Any,
    items: list[Item],
    pipeline: MediaPipeline,
    resolver: MediaResolver,
    lora: Any,
) -> tuple[list[Completion], dict[int, ItemError]]:
    """Every prompt through the engine (after ``--warmup`` prompts, untimed); the first
    failure ends the run, but for an answer its constraint does not allow (stage output),
    kept with its error."""
    from mmrun import engine

    plan = runner.plan
    outcomes: dict[int, Completion] = {}
    errors: dict[int, ItemError] = {}

    def keep(outcome: Outcome) -> None:
        if outcome.error is not None and outcome.error.stage != "output":
            raise _as_error(outcome.error)
        assert outcome.completion is not None
        outcomes[outcome.item.index] = outcome.completion
        if outcome.error is not None:
            errors[outcome.item.index] = outcome.error

    with engine.interruptible():
        if plan.options.warmup:
            start = time.perf_counter()
            warm = MediaPipeline(
                plan, iter(items[: plan.options.warmup]), resolver, 1, known=pipeline.resolved
            )
            runner.drive(handle, warm, lambda _: None, lora=lora)
            runner.timings["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        runner.drive(handle, pipeline, keep, lora=lora)
        runner.timings["generate_s"] = time.perf_counter() - start
    return [outcomes[i] for i in range(len(items))], errors


def run_batch(
    plan: Plan,
    renderers: RendererFactory,
    emit: Sink,
    items: Iterator[Item | None],
    *,
    hooks: Hooks | None = None,
    prefetch: bool = True,
) -> tuple[Stats, Any]:
    """A batch: every item, each outcome given to ``emit`` as soon as it is known, a failed
    prompt an outcome like the others. The counts, and the engine (still running: the caller
    stops it) or None.

    ``items`` may yield None (nothing right now). ``prefetch``: start on the first items'
    media while the engine starts; a replica of a parallel run asks for prompts only once
    its engine is up, so that no prompt waits on an engine still starting.
    """
    from mmrun import engine

    runner = Runner(plan, renderers, hooks)
    stats = Stats()
    window = runner.window(replica=not prefetch)
    resolver = MediaResolver(plan.modality, runner.hooks.on_request, runner.hooks.on_progress)
    # Twice the window ahead, from the engine's start on: decoding costs vLLM's frontend (this
    # process) nothing while it waits for its engine core, and competes with its request
    # processing afterwards. On an H200 (512 prompts x 4 images), resolving only 64 prompts
    # ahead during the start gave 17.3 prompts/s instead of 23.6 and the first result 8 s
    # later, for an engine ready no sooner (docs/performance.md).
    pipeline = MediaPipeline(
        plan,
        items,
        resolver,
        ahead=2 * window if prefetch else window // 2,
        budget=prefetch_budget(),
    )
    handle = None
    try:
        runner.resolve_companions()
        if not prefetch:
            pipeline.keep_futures = False
        handle = runner.start(resolver, pipeline if prefetch else None, abort_on_media=False)
        pipeline.keep_futures = False
        pipeline.futures.clear()
        lora = _lora(plan, resolve=not plan.options.dry_run)
        if runner.hooks.on_started is not None:
            runner.hooks.on_started(plan.items.total)
        t_first: list[float] = []

        def sink(outcome: Outcome) -> None:
            stats.record(outcome)
            if not t_first:
                t_first.append(time.perf_counter())
            emit(outcome)

        def stop() -> bool:
            return plan.options.fail_fast and stats.failed > 0

        start = time.perf_counter()
        context = engine.interruptible() if handle is not None else contextlib.nullcontext()
        with context:
            runner.drive(handle, pipeline, sink, lora=lora[1], stop=stop, window=window)
        end = time.perf_counter()
        runner.timings["generate_s"] = end - start
        runner.timings["first_result_s"] = (t_first[0] if t_first else end) - runner._t0
        runner.timings["total_s"] = end - runner._t0
        stats.timings = runner.timings
        returned, handle = handle, None
        return stats, returned
    finally:
        if handle is not None:
            handle.close()
        resolver.close()


def _raise_first_problem(plan: Plan, futures: Sequence[Future[MediaItem]]) -> None:
    """Wait for every resolution; raise the first failure, or the first item the model
    cannot take."""
    problem = plan.media_problem([future.result() for future in futures])
    if problem is not None:
        raise MediaError(problem)


def _as_error(error: ItemError) -> BaseException:
    """A failed prompt of a run of named prompts, as the run's error."""
    if error.cause is not None:
        return error.cause
    if error.stage == "request":  # vLLM refused it
        return EngineError(f"vLLM refused the request: {error.message}")
    return EngineError(error.message)


def _lora(plan: Plan, resolve: bool) -> tuple[str | None, Any]:
    path = lora_path(plan.spec.lora, plan.model, resolve)
    adapter = plan.spec.lora
    if adapter is None or path is None or plan.options.dry_run:
        return path, None
    from mmrun import engine

    return path, engine.lora_request(adapter.name, adapter.int_id, path)
