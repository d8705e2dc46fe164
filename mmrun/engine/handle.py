"""The vLLM handle, the only module that imports vLLM (inside functions): start the engine,
shape requests as vLLM's examples do, submit them and collect each result as it finishes."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mmrun.engine.cpu import prepare_the_cpu_start
from mmrun.engine.environment import (
    heap_frozen,
    is_quiet,
    one_thread_until_forked,
    use_private_rpc_dir,
)
from mmrun.engine.failures import (
    OOM_PATTERNS,
    engine_died,
    engine_failure,
    engine_is_dead,
    one_line,
    rejection_reason,
)
from mmrun.engine.gpu import use_frontend_threads, users_gpu_threads
from mmrun.engine.output import use_engine_log
from mmrun.engine.processes import (
    WARM_JOIN_S,
    interruptible,
    interrupts_held,
    kill_engine_processes,
    warm_up_when_forked,
    watch_engine_core,
)
from mmrun.errors import MissingDependencyError, UsageError
from mmrun.outcome import Completion, TokenLogprob
from mmrun.request import Prompt
from mmrun.vllm_internals import (
    engine_core,
    engine_core_processes,
    output_queue,
    output_request_id,
    streams_requests,
)

# How long the exit codes of a dead engine's processes are waited for, when vLLM told of the
# death first.
DEATH_READ_S = 2.0


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError(
            f"vLLM is not installed or cannot be imported ({exc})",
            hint="run `make install` (CPU) or `pip install vllm` (GPU)",
        ) from exc
    return vllm


def vllm_module(name: str) -> Any:
    """A module of vLLM (``vllm.multimodal.video``, ...), for a modality that uses vLLM's own
    media loaders."""
    import_vllm()
    return importlib.import_module(name)


class StartAborted(Exception):
    """``start`` was asked to stop (its ``abort`` event was set) and did."""


def start(
    engine_args: Mapping[str, Any],
    abort: threading.Event | None = None,
    engines_on_host: int = 1,
    warm_up: Callable[[], None] | None = None,
    env: Iterable[tuple[str, str]] = (),
    timings: dict[str, float] | None = None,
) -> Any:
    """Create ``vllm.LLM`` from the composed engine arguments, in this process's environment
    with ``env`` added (variables it sets already keep their values). Setting ``abort`` while it
    starts (e.g. a download failed meanwhile) stops the start and raises StartAborted.
    ``engines_on_host``: how many engines share this host's cores (``-dp N``). ``warm_up``:
    work that the first request would otherwise wait for (mmrun's first prompt, which loads
    the model's processor or tokenizer), done in a thread during the start, after vLLM's own
    frontend has loaded the model's processor there (see ``warm_up_when_forked``; the seconds
    that took go to ``timings["frontend_warm_s"]``)."""
    aborted = abort.is_set if abort is not None else lambda: False
    if aborted():
        raise StartAborted
    for name, value in env:
        os.environ.setdefault(name, value)
    use_private_rpc_dir()
    use_engine_log()
    threads = use_frontend_threads(engines_on_host) or users_gpu_threads()
    with interrupts_held():  # Ctrl-C meanwhile takes effect once vLLM is imported
        vllm = import_vllm()  # seconds, and not interrupted by ``abort``: checked again after it
    if aborted():
        raise StartAborted
    prepare_the_cpu_start(engine_args)
    constructed, failed = threading.Event(), threading.Event()
    warm = None
    if warm_up is not None:
        warm = threading.Thread(
            target=warm_up_when_forked,
            args=(warm_up, constructed, failed, threading.get_ident(), timings),
            name="mmrun-warm",
            daemon=True,
        )
    try:
        with interruptible(abort) as interrupted:
            if warm is not None:
                warm.start()
            try:
                with heap_frozen(), one_thread_until_forked(threads):
                    llm = _construct(vllm, engine_args)
            except BaseException:
                failed.set()  # nothing to warm up for
                raise
            finally:
                constructed.set()
            if warm is not None:
                warm.join(WARM_JOIN_S)
            if interrupted.is_set():  # vLLM swallowed the interrupt and finished starting anyway
                shutdown(llm, now=True)
                raise KeyboardInterrupt
    except Exception:
        if aborted():  # vLLM's error is only the consequence
            raise StartAborted from None
        raise
    if aborted():  # an engine without processes of its own (it runs in this one) started
        shutdown(llm, now=True)
        raise StartAborted
    return llm


def _construct(vllm: Any, engine_args: Mapping[str, Any]) -> Any:
    args = dict(engine_args)
    if is_quiet():  # vLLM's "Loading safetensors checkpoint shards" bars, one per engine process
        args.setdefault("use_tqdm_on_load", False)
    try:
        return vllm.LLM(**args)
    except Exception as exc:
        message = str(exc).strip()
        if isinstance(exc, TypeError) and "argument" in message:
            raise UsageError(
                f"vLLM rejected an engine argument: {message}",
                hint="check --engine-arg names against `vllm serve --help`",
            ) from exc
        rejected = isinstance(exc, ValueError) or type(exc).__name__ == "ValidationError"
        if rejected and not OOM_PATTERNS.search(message):
            raise UsageError(
                f"vLLM rejected the engine arguments: {rejection_reason(message, exc)}",
                hint="check --engine-arg values and the model id",
            ) from exc
        raise engine_failure(exc, model=args.get("model")) from exc


def sampling_params(
    *,
    temperature: float,
    max_tokens: int,
    stop_token_ids: Sequence[int],
    seed: int | None,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    vllm = import_vllm()
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if stop_token_ids:
        kwargs["stop_token_ids"] = list(stop_token_ids)
    if seed is not None:
        kwargs["seed"] = seed
    kwargs.update(extra or {})
    constraint = kwargs.get("structured_outputs")
    try:
        if isinstance(constraint, Mapping):  # plain data up to here (mmrun.structured)
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(**constraint)
        return vllm.SamplingParams(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"invalid sampling parameters: {exc}") from exc


def lora_request(name: str, int_id: int, path: str) -> Any:
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, int_id, path)


def device_name() -> str:
    """The kind of device the installed vLLM runs on ("cuda", "cpu", ...)."""
    try:
        from vllm.platforms import current_platform

        return str(current_platform.device_type or "unknown")
    except Exception:  # an install too broken to tell: the selftest reports its own failure
        return "unknown"


# Shaping requests, as vLLM's own examples do in run_generate / run_chat.


def generate_input(
    prompt: Prompt,
    modality: str,
    media: Sequence[Any],
    companions: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """One ``LLM.generate`` prompt: the text (or token ids) and its media, after the items of
    other kinds it carries too (``companions``: vLLM's name for each kind -> its items)."""
    request: dict[str, Any] = (
        {"prompt": prompt.text}
        if prompt.text is not None
        else {"prompt_token_ids": list(prompt.token_ids or ())}
    )
    data = list(prompt.multi_modal_data) if prompt.multi_modal_data is not None else list(media)
    mm_data = {k: list(v) for k, v in (companions or {}).items() if v}
    if data:
        mm_data[modality] = data
    if mm_data:
        request["multi_modal_data"] = mm_data
    return request


def chat_input(question: str, parts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ``LLM.chat`` conversation: a user turn with the question, then the media parts."""
    return [{"role": "user", "content": [{"type": "text", "text": question}, *parts]}]


class RequestRejected(Exception):
    """vLLM refused one request (too many items, a prompt longer than the model takes, media
    its processor cannot use); the engine itself is fine."""


Finished = tuple[str, "Completion | str"]  # request id, and its completion or why it failed


class Engine:
    """A started ``vllm.LLM``: requests go in one at a time and come out as they finish.

    Use it inside ``interruptible()``. Each request is checked and prepared by vLLM when it is
    submitted, so one that vLLM
    refuses fails alone (``RequestRejected``) and the others go on; results come back per
    request, as soon as each is finished, from the engine's own loop (what ``LLM.generate``
    runs internally, without waiting for the whole batch). Only the thread that started it
    may use it.
    """

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self._streaming = streams_requests(llm)
        self._pending: list[tuple[str, Any, Any, Any, str | None]] = []
        self._ids = 0
        self.in_flight = 0
        self._closed = threading.Event()
        self._exits: list[int | None] = []  # the engine core processes', once they ended
        self._processes: list[Any] = []
        # The log probabilities each request in flight asked for (SamplingParams.logprobs).
        self._logprobs: dict[str, int | None] = {}
        if self._streaming:
            self._processes = engine_core_processes(engine_core(llm))
            watch_engine_core(llm, self._closed, self._exits)

    def submit(
        self, request: Any, params: Any, lora: Any | None, *, chat: bool, template: str | None
    ) -> str:
        """Queue one request (a generate prompt, or a chat conversation); its request id."""
        if not self._streaming:  # an older vLLM: the request goes with the next batched call
            self._ids += 1
            request_id = f"w{self._ids}"
            self._pending.append((request_id, request, params, lora, template if chat else "-"))
            self._logprobs[request_id] = getattr(params, "logprobs", None)
            self.in_flight += 1
            return request_id
        try:
            if chat:
                ids = self.llm.enqueue_chat(
                    [request], params, use_tqdm=False, lora_request=lora, chat_template=template
                )
            else:
                ids = self.llm.enqueue([request], params, lora_request=lora, use_tqdm=False)
        except Exception as exc:
            if engine_is_dead(exc):
                raise self._died(exc) from exc
            raise RequestRejected(one_line(exc)) from exc
        self.in_flight += 1
        request_id = output_request_id(str(ids[0]))
        self._logprobs[request_id] = getattr(params, "logprobs", None)
        return request_id

    def _died(self, exc: BaseException) -> Exception:
        """mmrun's error for the engine that stopped. vLLM may tell of the death before the
        watch thread has the exit codes: then they are read here (up to 2 s in all). When the
        watch thread reaps a process at the same moment, this join finds no exit code (the
        other waitpid took it), and the thread's list has it a moment later."""
        exits = list(self._exits)
        deadline = time.monotonic() + DEATH_READ_S
        while not any(exits) and self._processes and time.monotonic() < deadline:
            for process in self._processes:
                with contextlib.suppress(Exception):
                    process.join(max(0.0, deadline - time.monotonic()))
            exits = [getattr(p, "exitcode", None) for p in self._processes] + list(self._exits)
            if not any(exits):
                time.sleep(0.05)
        return engine_died(exc, exits)

    def has_output(self) -> bool:
        """Whether results are waiting, so that ``poll`` would return at once. Only an engine
        core in processes of its own tells (its output queue); otherwise False."""
        if not self._streaming:
            return False
        queue = output_queue(engine_core(self.llm))
        try:
            return queue is not None and not queue.empty()
        except Exception:  # another vLLM layout
            return False

    def poll(self) -> list[Finished]:
        """The requests that finished since the last call; waits for at least one engine
        step. Only call it with requests in flight."""
        if not self._streaming:
            return self._run_pending()
        try:
            outputs = self.llm.llm_engine.step()
        except Exception as exc:  # the engine as a whole failed: its core died
            raise self._died(exc) from exc
        finished: list[Finished] = []
        for output in outputs:
            if not getattr(output, "finished", False):
                continue
            self.in_flight -= 1
            request_id = str(output.request_id)
            finished.append((request_id, self._finished(request_id, output)))
        return finished

    def _run_pending(self) -> list[Finished]:
        """Older vLLM (no ``LLM.enqueue``): one ``generate`` or ``chat`` call for what was
        submitted; a call vLLM refuses is split in halves until the request at fault is alone."""
        batch, self._pending = self._pending, []
        self.in_flight -= len(batch)
        return self._call(batch)

    def _call(self, batch: list[tuple[str, Any, Any, Any, str | None]]) -> list[Finished]:
        if not batch:
            return []
        _, _, params, lora, template = batch[0]
        try:
            if template != "-":
                outputs = self.llm.chat(
                    [r for _, r, *_ in batch],
                    params,
                    use_tqdm=False,
                    lora_request=lora,
                    chat_template=template,
                )
            else:
                outputs = self.llm.generate(
                    [r for _, r, *_ in batch],
                    sampling_params=params,
                    lora_request=lora,
                    use_tqdm=False,
                )
        except Exception as exc:
            if engine_is_dead(exc):
                raise self._died(exc) from exc
            if len(batch) == 1:
                return [(batch[0][0], one_line(exc))]
            half = len(batch) // 2
            return self._call(batch[:half]) + self._call(batch[half:])
        return [
            (rid, self._finished(rid, out)) for (rid, *_), out in zip(batch, outputs, strict=True)
        ]

    def _finished(self, request_id: str, output: Any) -> Completion | str:
        return _finished(output, self._logprobs.pop(request_id, None), self._decode)

    def _decode(self, token_id: int) -> str:
        """A token's text, as vLLM's server decodes one that its log probabilities leave out."""
        return str(self.llm.get_tokenizer().decode([token_id]))

    def close(self) -> None:
        """Stop the engine now (the results are in)."""
        self._closed.set()
        shutdown(self.llm, now=True)


def _finished(
    output: Any, top_logprobs: int | None = None, decode: Callable[[int], str] | None = None
) -> Completion | str:
    """A finished request's outputs (``n`` of them where it sampled several), each with its
    tokens' log probabilities where it asked for them (``top_logprobs``: SamplingParams'
    ``logprobs``); ``decode`` turns a token id into its text where vLLM gave none."""
    outputs = sorted(output.outputs, key=lambda o: getattr(o, "index", 0))
    for choice in outputs:
        if choice.finish_reason in ("abort", "error"):
            return f"vLLM ended the request ({choice.finish_reason})"
    first, *others = (_choice(choice, top_logprobs, decode) for choice in outputs)
    return dataclasses.replace(
        first,
        prompt_tokens=len(output.prompt_token_ids or []),
        cached_tokens=getattr(output, "num_cached_tokens", None),
        created_cache_tokens=getattr(output, "num_cache_creation_tokens", None),
        others=tuple(others),
    )


def _choice(
    choice: Any, top_logprobs: int | None, decode: Callable[[int], str] | None
) -> Completion:
    """One of a request's outputs (vLLM's CompletionOutput)."""
    logprobs = None
    if top_logprobs is not None and choice.logprobs is not None:
        logprobs = tuple(
            _token_logprob(token_id, step, decode)
            for token_id, step in zip(choice.token_ids, choice.logprobs, strict=False)
        )
    return Completion(
        text=choice.text,
        prompt_tokens=0,
        completion_tokens=len(choice.token_ids),
        finish_reason=choice.finish_reason,
        logprobs=logprobs,
        top_logprobs=top_logprobs or 0,
    )


def _token_logprob(
    token_id: int, step: Mapping[int, Any] | None, decode: Callable[[int], str] | None
) -> TokenLogprob:
    """A generated token's log probability from vLLM's step of ``Logprob``s (token id ->
    logprob, rank, decoded_token), the token's text decoded where vLLM left it out (as vLLM's
    server does)."""

    def text(tid: int, logprob: Any) -> str:
        decoded = getattr(logprob, "decoded_token", None)
        if decoded is not None:
            return str(decoded)
        return decode(tid) if decode is not None else ""

    own = None if step is None else step.get(token_id)
    if step is None or own is None:
        return TokenLogprob(decode(token_id) if decode is not None else "", None)
    return TokenLogprob(
        text(token_id, own),
        float(own.logprob),
        tuple((text(tid, lp), float(lp.logprob)) for tid, lp in step.items()),
    )


def shutdown(llm: Any, *, now: bool = False) -> None:
    """Stop the engine's processes now, not at interpreter exit.

    vLLM's own stop sends SIGTERM and waits for the engine core to tear down its workers:
    about 4.5 s on the CPU engine (measured), for nothing once the results are in. With
    ``now``, the engine's processes are killed first, and vLLM's stop then only closes its
    sockets (0.05 s)."""
    core = engine_core(llm)
    if now:
        processes = engine_core_processes(core)
        if processes:
            kill_engine_processes(processes)
    for target in (core, getattr(llm, "llm_engine", None)):
        stop = getattr(target, "shutdown", None)
        if callable(stop):
            with contextlib.suppress(Exception):  # best effort during teardown
                stop()
            return
