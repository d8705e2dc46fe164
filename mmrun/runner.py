"""One engine working through a stream of prompts: media -> request -> engine -> outcome.

The media of the first prompts are fetched and decoded (mmrun.prefetch) while the engine
starts; from then on they stay a bounded window ahead of the engine. The main thread builds
each prompt's request (mmrun.builder), submits it, and hands every finished prompt to the
caller's sink as soon as it is done. A run named on the command line (``run_named``) and a
batch (``run_engine_batch``, used by the backends) go through the same loop; they differ in
what a failed prompt does (ends the run, or becomes an error line).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mmrun.builder import RendererFactory, RequestBuilder, ServerRequestBuilder
from mmrun.errors import EngineDied, EngineError, MediaError
from mmrun.hub_access import check_reachable, lora_path
from mmrun.item import Item
from mmrun.media import MediaItem, MediaResolver, prefetch_budget
from mmrun.outcome import Completion, Hooks, ItemError, Outcome, Sink, Stats
from mmrun.plan import Plan
from mmrun.prefetch import MediaPipeline, Ready
from mmrun.request import Prompt, TemplateRenderer
from mmrun.restarts import EngineLost, Restarts, Verdict
from mmrun.structured import checked


@dataclass
class RunResult:
    """A run named on the command line: its plan, the prompt, the media and each output."""

    plan: Plan
    question: str
    prompt: Prompt | None
    lora_path: str | None
    media: list[MediaItem] = field(default_factory=list)
    media_per_prompt: list[list[int]] = field(default_factory=list)
    outputs: list[Completion] = field(default_factory=list)
    errors: dict[int, ItemError] = field(default_factory=dict)  # by output index: stage output
    timings: dict[str, float] = field(default_factory=dict)
    # A dry run whose prompt could not be rendered (the model's processor is not at hand): why.
    prompt_note: str | None = None


def _settle(future: Future[None], work: Callable[[], None]) -> None:
    try:
        work()
    except BaseException as exc:  # raised where the caller waits for it
        future.set_exception(exc)
    else:
        future.set_result(None)


class Runner:
    """One engine's run of a plan's prompts."""

    def __init__(self, plan: Plan, renderers: RendererFactory, hooks: Hooks | None = None):
        self.plan = plan
        self.hooks = hooks or Hooks()
        kind = RequestBuilder if plan.engines.server is None else ServerRequestBuilder
        self.builder = kind(plan, self._renderer(renderers))
        self.timings: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self.server_seqs: int | None = None  # a --server's max_num_seqs, where it tells

    def _renderer(self, renderers: RendererFactory) -> TemplateRenderer:
        """The plan's template renderer; a --server run's remembers its answers across runs
        (mmrun.templates.RememberedRenderer): a run against a server then loads no processor
        for the prompts a run before it rendered."""
        from mmrun.templates import HFTemplateRenderer, RememberedRenderer

        renderer = renderers(self.plan.model, self.plan.spec.trust_remote_code)
        if self.plan.engines.server is None or not isinstance(renderer, HFTemplateRenderer):
            return renderer
        return RememberedRenderer(renderer, self.plan.model, self.plan.spec.trust_remote_code)

    def window(self, replica: bool = False) -> int:
        """How many prompts may be in the engine at once: enough to keep its scheduler full
        (twice what it runs together), few enough that memory stays bounded. A replica of a
        parallel run keeps no more than that, so that prompts go to whichever replica has room."""
        seqs = self.server_seqs or int(self.plan.engine_args.get("max_num_seqs") or 256)
        return 2 * seqs if replica else max(16, 2 * seqs)

    def resolver(self) -> MediaResolver:
        # A dry run needs no network: a default item it cannot fetch is shown as a placeholder.
        return MediaResolver(
            self.plan.modality,
            self.hooks.on_request,
            self.hooks.on_progress,
            placeholders=self.plan.dry_run,
        )

    def start(
        self, pipeline: MediaPipeline | None, abort_on_media: bool, *, again: bool = False
    ) -> Any:
        """Start the engine while the first media resolve (those of ``pipeline``); its handle,
        or None for a dry run. ``abort_on_media``: a media failure stops the start (a named
        run needs every item); else a failed item waits for the run. ``again``: a restart
        after the engine died (the caller has said so already)."""
        if self.plan.dry_run:
            return None
        if self.plan.engines.server is not None:
            return self.connect(pipeline)
        from mmrun import engine

        check_reachable(self.plan.model, "the model")  # vLLM's start asks the Hub next
        if self.hooks.on_engine_start is not None and not again:
            self.hooks.on_engine_start()
        if pipeline is not None:
            # A batch's first prompts (prefetch.UNSIZED_AHEAD), and no more until the engine is
            # up: decoding beside vLLM's imports kept them waiting for the GIL.
            pipeline.fill()
        t_start = time.perf_counter()
        abort = threading.Event()
        failed: list[Future[Any]] = []
        if abort_on_media and pipeline is not None:
            # A mistyped URL is reported in a second, not after the engine has started.
            def check(future: Future[Any]) -> None:
                if not future.cancelled() and future.exception() is not None:
                    failed.append(future)
                    abort.set()

            for future in list(pipeline.futures):
                future.add_done_callback(check)
        try:
            llm = engine.start(
                self.plan.engine_args,
                abort=abort,
                engines_on_host=self.plan.engines.on_host,
                env=self.plan.engine_env,
                # The first prompt loads the model's processor or tokenizer (half a second to
                # seconds): built while the engine starts, not after it is ready.
                warm_up=lambda: self.builder.warm(pipeline.peek() if pipeline else None),
                timings=self.timings,
            )
        except engine.StartAborted:
            failed[0].result()  # raises the failure
            raise
        took = time.perf_counter() - t_start
        if again:
            self.timings["restarts_s"] = self.timings.get("restarts_s", 0.0) + took
        else:
            self.timings["engine_start_s"] = took
        return engine.Engine(llm)

    def connect(self, pipeline: MediaPipeline | None) -> Any:
        """The plan's vLLM server instead of an engine of its own: checked before any prompt
        (it answers, takes the key, serves the model), its window of requests in flight sized
        to its ``max_num_seqs`` where it tells, else to the plan's."""
        from mmrun.engine import server

        target = self.plan.engines.server
        assert target is not None
        t_start = time.perf_counter()
        if pipeline is not None:
            pipeline.fill()
        client = server.Client(target)
        adapter = self.plan.spec.lora.name if self.plan.spec.lora is not None else None
        template = self.plan.method == "generate" or self.plan.spec.chat_template is not None
        # The first prompt (the processor it may load) is built while the server is asked.
        warmed: Future[None] = Future()
        first = pipeline.peek() if pipeline else None
        threading.Thread(
            target=lambda: _settle(warmed, lambda: self.builder.warm(first)),
            name="mmrun-warm",
            daemon=True,
        ).start()
        served = server.connect(client, self.plan.model, adapter, request_template=template)
        seqs = server.server_seqs(client)
        if seqs is not None:
            self.server_seqs = seqs
        warmed.result()
        self.timings["engine_start_s"] = time.perf_counter() - t_start
        return server.ServerEngine(client, served, senders=self.window())

    def drive(
        self,
        llm: Any,
        pipeline: MediaPipeline,
        sink: Sink,
        *,
        lora: Any,
        stop: Callable[[], bool] = lambda: False,
        window: int | None = None,
        alone: Callable[[str], bool] = lambda _: False,
    ) -> None:
        """Submit every item, keep the engine full, give each outcome to ``sink``.

        Without an engine (dry run) each item is only prepared. ``stop()`` ends the loop early
        (--fail-fast); the prompts still in the engine are then abandoned.
        """
        for outcome in self.outcomes(
            llm, pipeline, lora=lora, stop=stop, window=window, alone=alone
        ):
            sink(outcome)

    def outcomes(
        self,
        llm: Any,
        pipeline: MediaPipeline,
        *,
        lora: Any,
        stop: Callable[[], bool] = lambda: False,
        window: int | None = None,
        alone: Callable[[str], bool] = lambda _: False,
    ) -> Generator[Outcome, None, None]:
        """What ``drive`` gives its sink, as an iterator in completion order: the engine
        answers a new stream of items without starting again (mmrun.api's Model).

        ``alone(id)``: the item must be the only one in the engine (mmrun.restarts). An
        engine that dies raises EngineLost with the items that were in it."""
        from mmrun import engine

        in_flight: dict[str, tuple[Outcome, Ready]] = {}
        window = window or self.window()
        chat, template = self.plan.method == "chat", self.plan.spec.chat_template
        while not stop():
            while len(in_flight) < window and not stop():
                if any(alone(o.item.id) for o, _ in in_flight.values()):
                    break
                ready = pipeline.next(block=not in_flight)
                if ready is None:
                    break
                if in_flight and alone(ready.item.id):
                    pipeline.put_back([ready])  # once the engine is empty
                    break
                outcome, request = self.builder.prepare(ready, engine=llm is not None)
                if request is None:
                    yield outcome
                    continue
                try:
                    chat_request = chat if request.chat is None else request.chat
                    request_id = llm.submit(
                        request.input, request.params, lora, chat=chat_request, template=template
                    )
                except engine.RequestRejected as exc:
                    outcome.error = ItemError("request", str(exc))
                    yield outcome
                    continue
                except EngineDied as exc:
                    raise EngineLost(exc, [r for _, r in in_flight.values()] + [ready]) from exc
                in_flight[request_id] = (outcome, ready)
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
            try:
                finished = llm.poll()
            except EngineDied as exc:
                raise EngineLost(exc, [r for _, r in in_flight.values()]) from exc
            for request_id, result in finished:
                outcome, _ = in_flight.pop(request_id)
                if isinstance(result, Completion):
                    outcome.completion, outcome.error = checked(
                        result, self.builder.constraint_for(outcome.item)
                    )
                elif isinstance(result, ItemError):  # a server's answer says which stage
                    outcome.error = result
                else:
                    outcome.error = ItemError("engine", result)
                yield outcome


def run_named(
    plan: Plan, renderers: RendererFactory, hooks: Hooks | None = None
) -> tuple[RunResult, Any]:
    """A run named on the command line: every prompt or none. The result, and the engine
    (still running, so that the caller shows the results before stopping it) or None."""
    runner = Runner(plan, renderers, hooks)
    builder = runner.builder
    items = list(plan.items)
    resolver = runner.resolver()
    handle = None
    try:
        t_media = time.perf_counter()
        pipeline = MediaPipeline(iter(items), resolver, ahead=len(items), checks=builder.checks())
        pipeline.fill()
        refused = pipeline.first_error()
        if refused is not None:
            raise _as_error(refused)
        media_done: list[float] = []
        for future in pipeline.futures:
            future.add_done_callback(lambda _: media_done.append(time.perf_counter()))
        runner.timings["prepare_s"] = time.perf_counter() - runner.t0
        builder.resolve_companions(runner.hooks)
        if builder.checks_media():
            # Waited for before the engine starts: an item the model cannot take (a clip too
            # long) fails in a second.
            _raise_first_problem(builder, pipeline.futures)
        handle = runner.start(pipeline, abort_on_media=True)
        if handle is not None and runner.hooks.on_started is not None:
            runner.hooks.on_started(len(items))
        t_started = time.perf_counter()
        _raise_first_problem(builder, pipeline.futures)
        runner.timings["media_wait_s"] = time.perf_counter() - t_started
        runner.timings["media_s"] = max(media_done, default=t_media) - t_media
        lora = _lora(plan, resolve=not plan.dry_run)
        t_render = time.perf_counter()
        question = builder.question_for(items[0])
        prompt, note = builder.prompt_or_note(question, pipeline.media_of(items[0]))
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
        result.timings["total_s"] = time.perf_counter() - runner.t0
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
        if plan.warmup:
            start = time.perf_counter()
            warm = MediaPipeline(
                iter(items[: plan.warmup]),
                resolver,
                1,
                known=pipeline.resolved,
                checks=runner.builder.checks(),
            )
            runner.drive(handle, warm, lambda _: None, lora=lora)
            runner.timings["warmup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        try:
            runner.drive(handle, pipeline, keep, lora=lora)
        except EngineLost as lost:  # a named run needs every prompt: it ends here
            raise lost.error from None
        runner.timings["generate_s"] = time.perf_counter() - start
    return [outcomes[i] for i in range(len(items))], errors


def run_engine_batch(
    plan: Plan,
    renderers: RendererFactory,
    emit: Sink,
    items: Iterator[Item | None],
    *,
    hooks: Hooks | None = None,
    prefetch: bool = True,
) -> tuple[Stats, Any]:
    """A batch on one engine: every item, each outcome given to ``emit`` as soon as it is
    known, a failed prompt an outcome like the others. The counts, and the engine (still
    running: the caller stops it) or None.

    ``items`` may yield None (nothing right now). ``prefetch``: start on the first items'
    media while the engine starts; a replica of a parallel run asks for prompts only once
    its engine is up, so that no prompt waits on an engine still starting.
    """
    from mmrun import engine

    runner = Runner(plan, renderers, hooks)
    stats = Stats()
    window = runner.window(replica=not prefetch)
    resolver = runner.resolver()
    # The first prompts while the engine starts, then a few ahead of the engine, within the
    # prefetch budget (mmrun.prefetch, docs/performance.md).
    pipeline = MediaPipeline(
        items,
        resolver,
        ahead=2 * window if prefetch else window // 2,
        budget=prefetch_budget(),
        checks=runner.builder.checks(),
        in_order=plan.dry_run,
    )
    handle = None
    try:
        runner.builder.resolve_companions(runner.hooks)
        if not prefetch:
            pipeline.keep_futures = False
        handle = runner.start(pipeline if prefetch else None, abort_on_media=False)
        window = runner.window(replica=not prefetch)  # a server's own size, where it told
        pipeline.keep_futures = False
        pipeline.futures.clear()
        lora = _lora(plan, resolve=not plan.dry_run)
        if runner.hooks.on_started is not None:
            runner.hooks.on_started(plan.items.total)
        t_first: list[float] = []

        def sink(outcome: Outcome) -> None:
            stats.record(outcome)
            if not t_first:
                t_first.append(time.perf_counter())
            emit(outcome)

        def stop() -> bool:
            return plan.fail_fast and stats.failed > 0

        restarts = Restarts(plan.engines.max_restarts)

        def counted(outcome: Outcome) -> None:
            if outcome.completion is not None:
                restarts.progressed()
            sink(outcome)

        start = time.perf_counter()
        while True:
            context = engine.interruptible() if handle is not None else contextlib.nullcontext()
            try:
                with context:
                    runner.drive(
                        handle,
                        pipeline,
                        counted,
                        lora=lora[1],
                        stop=stop,
                        window=window,
                        alone=restarts.alone,
                    )
                break
            except EngineLost as lost:
                handle.close()
                handle = None
                handle = _restart(runner, pipeline, restarts, lost, sink)
                stats.restarts = restarts.total
                if handle is None:
                    break
        end = time.perf_counter()
        runner.timings["generate_s"] = end - start
        runner.timings["first_result_s"] = (t_first[0] if t_first else end) - runner.t0
        runner.timings["total_s"] = end - runner.t0
        stats.timings = runner.timings
        returned, handle = handle, None
        return stats, returned
    finally:
        if handle is not None:
            handle.close()
        resolver.close()


def _restart(
    runner: Runner, pipeline: MediaPipeline, restarts: Restarts, lost: EngineLost, sink: Sink
) -> Any:
    """After the engine died: its prompts back in the queue (the cause, once known, an error
    line instead), a new engine started after the back-off; None when nothing is left to do.
    A new engine that fails to start (killed while it loads, as the OOM killer does) is one
    more death in a row. Raises the engine's error past the restart limit."""
    while True:
        verdict = restarts.died(lost)
        for ready in verdict.convicted:
            outcome = runner.builder.prepare(ready, engine=False)[0]
            outcome.error = ItemError(
                "engine",
                f"the engine died each time this prompt ran alone ({lost.error.message})",
            )
            sink(outcome)
        pipeline.put_back(verdict.requeue)
        if pipeline.done():
            return None
        _announce(runner, lost, verdict, restarts)
        time.sleep(verdict.backoff_s)
        try:
            return runner.start(None, abort_on_media=False, again=True)
        except EngineError as exc:
            died = EngineDied(f"it failed to start again: {exc.message}", hint=exc.hint)
            lost = EngineLost(died, [])


def _announce(runner: Runner, lost: EngineLost, verdict: Verdict, restarts: Restarts) -> None:
    count = (
        f"restart {verdict.restart} of at most {restarts.limit} in a row"
        if verdict.restart
        else "restart not counted: its cause is out of the batch"
    )
    log = getattr(lost.error, "log", None)
    runner.hooks.notice(
        f"mmrun: the engine died ({lost.error.message}); {len(verdict.requeue)} prompt(s) back "
        f"in the queue{', the one that killed it given up' if verdict.convicted else ''}; "
        f"starting it again in {verdict.backoff_s:.0f}s ({count})"
        + (f"; its log: {log}" if log else ""),
        warning=True,
    )


def _raise_first_problem(builder: RequestBuilder, futures: Sequence[Future[MediaItem]]) -> None:
    """Wait for every resolution; raise the first failure, or the first item the model
    cannot take."""
    problem = builder.media_problem([future.result() for future in futures])
    if problem is not None:
        raise MediaError(problem)


def _as_error(error: ItemError) -> BaseException:
    """A failed prompt of a run of named prompts, as the run's error."""
    if error.cause is not None:
        return error.cause
    if error.stage == "request":  # vLLM refused it
        return EngineError(f"vLLM refused the request: {error.message}")
    return EngineError(error.message)


def lora_for(plan: Plan) -> Any:
    """The LoRA request of a plan whose model needs its adapter (resolved), else None."""
    return _lora(plan, resolve=not plan.dry_run)[1]


def _lora(plan: Plan, resolve: bool) -> tuple[str | None, Any]:
    adapter = plan.spec.lora
    if plan.engines.server is not None and not plan.dry_run:  # the server loaded it
        return None, None
    path = lora_path(adapter, plan.model, resolve)
    if adapter is None or path is None or plan.dry_run:
        return path, None
    from mmrun import engine

    return path, engine.lora_request(adapter.name, adapter.int_id, path)
