"""One run, start to finish: options -> loader request -> media -> vLLM -> results.

Media are fetched and decoded in worker threads while the engine starts on the main thread;
all prompts reach vLLM in one ``generate`` or ``chat`` call.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrun import __version__
from mmrun.errors import (
    DownloadError,
    EngineError,
    MediaError,
    MissingDependencyError,
    RemoteCodeError,
    UnsupportedModelError,
    UsageError,
)
from mmrun.hub import check_reachable
from mmrun.media import MediaItem, MediaResolver, ProgressFn, smart_resize_size
from mmrun.plan import compose_engine_args
from mmrun.registry import LoaderSpec, Method, Modality, Registry
from mmrun.request import LoaderContext, Message, ModelRequest, TemplateRenderer, TemplateSource
from mmrun.support import vllm_info

TRUST_REMOTE_CODE_ENV = "MMRUN_TRUST_REMOTE_CODE"
SCHEMA = "mmrun.result/1"
# More prompts than this in one batched call is a typo (an extra zero or three), not a plan:
# refused before mmrun builds per-prompt lists that would exhaust memory.
MAX_NUM_PROMPTS = 100_000


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


@dataclass
class RunResult:
    """Everything the output layer prints; ``to_json`` is the documented document."""

    spec: LoaderSpec
    model: str
    method: Method
    question: str
    request: ModelRequest
    engine_args: dict[str, Any]
    sampling: dict[str, Any]
    lora_path: str | None
    media: list[MediaItem]
    media_per_prompt: list[list[int]]
    num_prompts: int
    dry_run: bool
    outputs: list[Any] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    vllm_version: str | None = None
    engine: Any = field(default=None, repr=False)

    def close(self) -> None:
        """Stop the engine (its processes are killed: the results are in). Results stay
        readable."""
        if self.engine is not None:
            from mmrun import engine

            engine.shutdown(self.engine, now=True)
            self.engine = None

    def to_json(self) -> dict[str, Any]:
        lora = self.request.lora
        return {
            "schema": SCHEMA,
            "model": {
                "key": self.spec.key,
                "repo_id": self.spec.repo_id,
                "model": self.model,
                "architecture": self.spec.architecture,
            },
            "modality": self.spec.modality,
            "method": self.method,
            "dry_run": self.dry_run,
            "question": self.question,
            "prompt": self.request.prompt,
            "prompt_token_ids": list(self.request.prompt_token_ids)
            if self.request.prompt_token_ids is not None
            else None,
            "request": {
                "engine_args": self.engine_args,
                "sampling": self.sampling,
                "stop_token_ids": list(self.request.stop_token_ids),
                "chat_template": self.request.chat_template,
                "lora": None
                if lora is None
                else {
                    "name": lora.name,
                    "int_id": lora.int_id,
                    "path": self.lora_path,
                },
                "num_prompts": self.num_prompts,
            },
            "media": [_media_json(item) for item in self.media],
            "media_per_prompt": self.media_per_prompt,
            "outputs": [
                {
                    "index": i,
                    "text": o.text,
                    "prompt_tokens": o.prompt_tokens,
                    "completion_tokens": o.completion_tokens,
                    "finish_reason": o.finish_reason,
                }
                for i, o in enumerate(self.outputs)
            ],
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "versions": {"mmrun": __version__, "vllm": self.vllm_version},
        }


def _media_json(item: MediaItem) -> dict[str, Any]:
    return {
        "source": item.source,
        "path": item.path,
        "sha256": item.sha256,
        "size_bytes": item.size_bytes,
        **item.info,
    }


def parse_engine_args(pairs: Sequence[str], option: str = "--engine-arg") -> dict[str, Any]:
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
    assert high is not None
    if opts.count is None:
        count = min(max(modality.default_count, low), high)
    else:
        count = opts.count
        if not low <= count <= high:
            raise UsageError(
                f"-n {count} is out of range for {spec.key}: it takes {low} to {high}",
                hint=f"use -n between {low} and {high}, or name files with --{noun}",
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
            f"--num-prompts {opts.num_prompts} does not match the {len(groups)} groups of {count}",
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


def check_supported(spec: LoaderSpec) -> str:
    info = vllm_info()
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


def check_durations(spec: LoaderSpec, items: Sequence[MediaItem]) -> None:
    """Refuse audio longer than the model takes (``spec.max_audio_seconds``)."""
    limit = spec.max_audio_seconds
    if limit is None:
        return
    for item in items:
        duration = item.info.get("duration_s")
        if duration is not None and duration > limit:
            raise MediaError(
                f"{item.source} is {duration:.1f} s long; {spec.key} takes at most {limit:g} s "
                "of audio per clip",
                hint=f"trim it to {limit:g} s or use a long-form model",
            )


class _PlanningRenderer:
    """Stands in for the real renderer while only a loader's engine arguments are needed."""

    def render(
        self,
        messages: Sequence[Message],
        *,
        source: TemplateSource,
        chat_template: str | None = None,
    ) -> str:
        return ""

    def token_id(self, token: str) -> int:
        return 0

    def eos_token_id(self) -> int:
        return 0


class _LazyMedia(Sequence[Any]):
    """The decoded media of one prompt, waited for only when a loader reads it."""

    def __init__(self, futures: Sequence[Future[MediaItem]]) -> None:
        self._futures = futures

    def __len__(self) -> int:
        return len(self._futures)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [f.result().data for f in self._futures[index]]
        return self._futures[index].result().data

    def __iter__(self) -> Iterator[Any]:
        return (f.result().data for f in self._futures)


def _resized(image: Any, request: ModelRequest) -> Any:
    rule = request.image_resize
    if rule is None:
        return image
    size = smart_resize_size(
        image.width, image.height, rule.factor, rule.min_pixels, rule.max_pixels
    )
    return image if size == image.size else image.resize(size)


def lora_path(request: ModelRequest, model: str, resolve: bool) -> str | None:
    """Where the LoRA adapter lives: inside a local model folder, or the model's Hub snapshot."""
    if request.lora is None:
        return None
    if Path(model).is_dir():
        base = model
    elif resolve:
        base = _snapshot(model)
    else:
        base = f"<snapshot of {model}>"
    sub = request.lora.subfolder
    return base if sub is None else os.path.join(base, sub)


def _snapshot(model: str) -> str:
    """The local snapshot of ``model`` (downloaded if need be), or one line saying why not."""
    check_reachable(model, "the LoRA adapter")
    from huggingface_hub import snapshot_download

    # huggingface_hub's errors are OSErrors; the HTTP client's own are not (httpx, or httpx2
    # from huggingface_hub 2 on).
    failures: tuple[type[Exception], ...] = (OSError, ValueError)
    for client in ("httpx", "httpx2"):
        if importlib.util.find_spec(client) is not None:
            failures += (importlib.import_module(client).HTTPError,)
    try:
        return str(snapshot_download(model))
    except failures as exc:
        first = next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__
        raise DownloadError(
            f"cannot fetch the snapshot of {model} (for its LoRA adapter): {first[:300]}",
            hint="check the model id and the network; offline, set HF_HUB_OFFLINE=1 with the "
            "model in the Hugging Face cache",
        ) from exc


def run(
    opts: RunOptions,
    registry: Registry,
    templates: Callable[[str, bool], TemplateRenderer],
    on_request: Callable[[str], None] | None = None,
    on_engine_start: Callable[[], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> RunResult:
    """Plan and, unless dry-run, execute one run. ``templates(model, trust)`` makes the renderer;
    ``on_request(url)`` is told of each download, ``on_engine_start()`` just before vLLM starts."""
    t0 = time.perf_counter()
    modality = registry.modalities[opts.modality]
    spec = registry.get(opts.modality, opts.key or modality.default_model)
    check_allowed(opts, spec)
    if opts.num_prompts < 1:
        raise UsageError(f"--num-prompts must be at least 1, got {opts.num_prompts}")
    if opts.num_prompts > MAX_NUM_PROMPTS:
        raise UsageError(
            f"--num-prompts {opts.num_prompts} is more than mmrun sends in one call "
            f"({MAX_NUM_PROMPTS:,})",
            hint="run mmrun several times",
        )
    if opts.temperature is not None and not math.isfinite(opts.temperature):
        raise UsageError(
            f"--temperature must be a finite number, got {opts.temperature}",
            hint="e.g. --temperature 0.7",
        )
    if opts.per_prompt is not None and not opts.sources:
        raise UsageError("--per-prompt needs named media", hint=f"add --{modality.name} files")
    vllm_version = vllm_info().version if opts.dry_run else check_supported(spec)
    count, per_prompt = choose_sources(opts, spec, modality)
    model = opts.model or spec.repo_id

    resolver = MediaResolver(modality, on_request, on_progress)
    try:
        unique = list(dict.fromkeys(s for sources in per_prompt for s in sources))
        t_media_start = time.perf_counter()
        futures = dict(zip(unique, resolver.submit(unique), strict=True))
        media_done: list[float] = []
        for future in futures.values():
            future.add_done_callback(lambda _: media_done.append(time.perf_counter()))
        question = opts.question if opts.question is not None else modality.question(count)
        media_view = _LazyMedia([futures[s] for s in per_prompt[0]])

        def load(renderer: TemplateRenderer) -> ModelRequest:
            return spec(
                LoaderContext(
                    question=question,
                    num_items=count,
                    model=model,
                    templates=renderer,
                    media=media_view,
                )
            )

        renderer = templates(model, spec.trust_remote_code)
        # Rendering a chat template loads the model's processor with transformers. The
        # engine's arguments never depend on the prompt, so a stand-in renderer gives them at
        # once and the engine starts; the prompt is rendered once it has started, when vLLM
        # has imported transformers and loaded the same processor (0.03 s then, measured).
        # Not in a thread while it starts: two threads importing transformers at once can
        # break its lazy modules (vLLM's start then raised "cannot import name
        # 'PretrainedConfig' from 'transformers'" on the H200).
        request = load(renderer if opts.dry_run else _PlanningRenderer())
        engine_args = compose_engine_args(
            spec,
            request,
            model=model,
            num_items=count,
            seed=opts.seed if opts.seed is not None else modality.seed,
            tensor_parallel_size=opts.tensor_parallel_size,
            overrides=opts.engine_args,
        )
        sampling = {
            "temperature": opts.temperature
            if opts.temperature is not None
            else modality.temperature,
            "max_tokens": opts.max_tokens if opts.max_tokens is not None else modality.max_tokens,
            **opts.sampling_args,
        }
        if request.multi_modal_data is not None:  # media re-encoded with the prompt: one set
            per_prompt = [per_prompt[0]] * len(per_prompt)
        result = RunResult(
            spec=spec,
            model=model,
            method=opts.method,
            question=question,
            request=request,
            engine_args=engine_args,
            sampling=sampling,
            lora_path=lora_path(request, model, resolve=not opts.dry_run),
            media=[],
            media_per_prompt=[[unique.index(s) for s in p] for p in per_prompt],
            num_prompts=len(per_prompt),
            dry_run=opts.dry_run,
            vllm_version=vllm_version,
        )
        t_plan = time.perf_counter()
        result.timings["prepare_s"] = t_plan - t0
        llm = None
        try:
            if spec.max_audio_seconds is not None:
                # Waited for before the engine starts: a clip too long fails in a second,
                # not after the engine start.
                check_durations(spec, [future.result() for future in futures.values()])
            if not opts.dry_run:
                from mmrun import engine

                check_reachable(model, "the model")  # vLLM's start asks the Hub next
                if on_engine_start is not None:
                    on_engine_start()
                t_start = time.perf_counter()
                llm = _start_unless_failed(engine_args, list(futures.values()))
                t_started = time.perf_counter()
                result.timings["engine_start_s"] = t_started - t_start
                result.request = load(renderer)
                result.timings["render_s"] = time.perf_counter() - t_started
                if result.request.engine_args != request.engine_args:
                    raise EngineError(
                        f"loader {spec.key!r} returned engine arguments that depend "
                        "on the rendered prompt",
                        hint="report this mmrun bug",
                    )
            t_media = time.perf_counter()
            items = {s: futures[s].result() for s in unique}
            result.media = [items[s] for s in unique]
            result.timings["media_wait_s"] = time.perf_counter() - t_media
            # Wall time from the first request to the last decoded item (overlaps engine start).
            result.timings["media_s"] = max(media_done, default=t_media_start) - t_media_start
            if llm is not None:
                result.outputs = _execute(llm, opts, result, items, per_prompt)
                result.engine, llm = llm, None  # the caller stops it, after showing the results
        finally:
            if llm is not None:  # a failure after the engine had started
                from mmrun import engine

                engine.shutdown(llm, now=True)
    finally:
        resolver.close()
    result.timings["total_s"] = time.perf_counter() - t0
    return result


def _start_unless_failed(engine_args: Mapping[str, Any], work: Sequence[Future[Any]]) -> Any:
    """Start the engine while ``work`` (downloads and decoding) goes on; the first of
    them to fail stops the start, and its error is the run's: a mistyped URL is reported in
    a second, not after the engine has started (tens of seconds)."""
    from mmrun import engine

    abort = threading.Event()
    failed: list[Future[Any]] = []

    def check(future: Future[Any]) -> None:
        if not future.cancelled() and future.exception() is not None:
            failed.append(future)
            abort.set()

    for future in work:
        future.add_done_callback(check)
    try:
        return engine.start(engine_args, abort=abort)
    except engine.StartAborted:
        failed[0].result()  # raises the failure
        raise


def _execute(
    llm: Any,
    opts: RunOptions,
    result: RunResult,
    items: Mapping[str, MediaItem],
    per_prompt: Sequence[Sequence[str]],
) -> list[Any]:
    from mmrun import engine

    request = result.request
    modality = result.spec.modality
    params = engine.sampling_params(
        temperature=result.sampling["temperature"],
        max_tokens=result.sampling["max_tokens"],
        stop_token_ids=request.stop_token_ids,
        seed=None,
        extra={k: v for k, v in result.sampling.items() if k not in ("temperature", "max_tokens")},
    )
    lora = None
    if request.lora is not None and result.lora_path is not None:
        lora = engine.lora_request(request.lora.name, request.lora.int_id, result.lora_path)

    def media_of(sources: Sequence[str]) -> list[Any]:
        data = [items[s].data for s in sources]
        return [_resized(d, request) for d in data] if modality == "image" else data

    batch: list[Any] = []
    if opts.method == "chat":
        batch = [
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": result.question},
                        *({"type": "image_pil", "image_pil": image} for image in media_of(sources)),
                    ],
                }
            ]
            for sources in per_prompt
        ]
    else:
        for sources in per_prompt:
            prompt: dict[str, Any] = (
                {"prompt": request.prompt}
                if request.prompt is not None
                else {"prompt_token_ids": list(request.prompt_token_ids or ())}
            )
            media = (
                list(request.multi_modal_data)
                if request.multi_modal_data is not None
                else media_of(sources)
            )
            if media:
                prompt["multi_modal_data"] = {modality: media}
            batch.append(prompt)

    def call(prompts: list[Any]) -> list[Any]:
        if opts.method == "chat":
            return engine.chat(llm, prompts, params, lora, request.chat_template)
        return engine.generate(llm, prompts, params, lora)

    if opts.warmup:
        start = time.perf_counter()
        call(batch[: opts.warmup])
        result.timings["warmup_s"] = time.perf_counter() - start
    start = time.perf_counter()
    completions = call(batch)
    result.timings["generate_s"] = time.perf_counter() - start
    return completions
