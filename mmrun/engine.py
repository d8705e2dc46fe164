"""The only module that imports vLLM (inside functions): start the engine, generate, chat."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmrun.errors import EngineError, MissingDependencyError, UsageError

_OOM_PATTERNS = re.compile(
    r"out of memory|OutOfMemory|No available memory for the cache blocks|"
    r"larger than the maximum number of tokens that can be stored in KV cache|"
    r"Insufficient memory|KV cache",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Completion:
    """One prompt's result, from vLLM's own counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError(
            f"vLLM is not installed or cannot be imported ({exc})",
            hint="run `make install` (CPU) or `pip install vllm` (GPU)",
        ) from exc
    return vllm


def _engine_failure(exc: BaseException) -> EngineError:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = next((line for line in text.splitlines() if line.strip()), text)
    if _OOM_PATTERNS.search(text):
        return EngineError(
            f"the engine ran out of memory: {first[:300]}",
            hint="lower --engine-arg max_model_len=... or max_num_seqs=..., or raise -tp",
        )
    return EngineError(f"vLLM failed: {first[:300]}", hint="rerun with -v to see vLLM's log")


def start(engine_args: Mapping[str, Any]) -> Any:
    """Create ``vllm.LLM`` from the composed engine arguments."""
    vllm = import_vllm()
    try:
        return vllm.LLM(**engine_args)
    except Exception as exc:
        message = str(exc).strip()
        if isinstance(exc, TypeError) and "argument" in message:
            raise UsageError(f"vLLM rejected an engine argument: {message}",
                             hint="check --engine-arg names against `vllm serve --help`") from exc
        rejected = isinstance(exc, ValueError) or type(exc).__name__ == "ValidationError"
        if rejected and not _OOM_PATTERNS.search(message):
            first = message.splitlines()[0] if message else repr(exc)
            raise UsageError(f"vLLM rejected the engine arguments: {first[:300]}",
                             hint="check --engine-arg values and the model id") from exc
        raise _engine_failure(exc) from exc


def sampling_params(*, temperature: float, max_tokens: int, stop_token_ids: Sequence[int],
                    seed: int | None, extra: Mapping[str, Any] | None = None) -> Any:
    vllm = import_vllm()
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if stop_token_ids:
        kwargs["stop_token_ids"] = list(stop_token_ids)
    if seed is not None:
        kwargs["seed"] = seed
    kwargs.update(extra or {})
    try:
        return vllm.SamplingParams(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"invalid sampling parameters: {exc}") from exc


def lora_request(name: str, int_id: int, path: str) -> Any:
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, int_id, path)


def _completions(outputs: Sequence[Any]) -> list[Completion]:
    results = []
    for output in outputs:
        best = output.outputs[0]
        results.append(Completion(
            text=best.text,
            prompt_tokens=len(output.prompt_token_ids or []),
            completion_tokens=len(best.token_ids),
            finish_reason=best.finish_reason,
        ))
    return results


def generate(llm: Any, inputs: Sequence[Mapping[str, Any]], params: Any, lora: Any | None) -> list[Completion]:
    """All prompts in one ``LLM.generate`` call."""
    try:
        outputs = llm.generate(list(inputs), sampling_params=params, lora_request=lora, use_tqdm=False)
    except Exception as exc:
        raise _engine_failure(exc) from exc
    return _completions(outputs)


def chat(llm: Any, conversations: Sequence[Sequence[Mapping[str, Any]]], params: Any,
         lora: Any | None, chat_template: str | None) -> list[Completion]:
    """All conversations in one ``LLM.chat`` call."""
    try:
        outputs = llm.chat([list(c) for c in conversations], sampling_params=params,
                           lora_request=lora, chat_template=chat_template, use_tqdm=False)
    except Exception as exc:
        raise _engine_failure(exc) from exc
    return _completions(outputs)


def shutdown(llm: Any) -> None:
    """Stop the engine's worker processes now, not at interpreter exit."""
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    for target in (core, engine):
        stop = getattr(target, "shutdown", None)
        if callable(stop):
            with contextlib.suppress(Exception):  # best effort during teardown
                stop()
            return


def configure_environment(verbose: bool) -> None:
    """Send vLLM's logs to stderr and keep them quiet unless asked for."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "ERROR")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
