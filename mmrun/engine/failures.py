"""What an engine failure means: vLLM's and torch's wording for "out of memory", the reason
the failing engine process logged (see mmrun.engine.log_stream), and mmrun's one-line error for it."""

from __future__ import annotations

import multiprocessing
import re
import signal
import time

from mmrun.engine import log_stream
from mmrun.engine.environment import keep_temporary
from mmrun.engine.output import engine_log_part
from mmrun.errors import EngineDied, EngineError
from mmrun.hub_access import offline, offline_hint

# vLLM's and torch's own wording for "the model, its KV cache or a batch does not fit"
# (vllm/v1/core/kv_cache_utils.py, vllm/v1/worker/utils.py and cpu_worker.py, torch's
# OutOfMemoryError). Specific phrases: a bare "KV cache" also matches configuration errors.
OOM_PATTERNS = re.compile(
    r"out of memory|OutOfMemory|\bMemoryError\b|No available memory for the cache blocks|"
    r"larger than the available KV cache memory|"
    r"larger than the maximum number of tokens that can be stored in KV cache|"
    r"less than desired (?:GPU|CPU) memory utilization|less than requested memory for kv|"
    r"Insufficient memory",
    re.IGNORECASE,
)


def engine_failure(exc: BaseException, model: object = None) -> EngineError:
    """mmrun's error for a failed start or generate call: the reason vLLM logged in the
    process that failed (see log_stream) where there is one, else the exception here."""
    text = f"{type(exc).__name__}: {exc}".strip()
    text = logged_root_cause() or text
    first = next((line for line in text.splitlines() if line.strip()), text)
    if isinstance(model, str) and offline() and NOT_CACHED.search(text):
        return EngineError(f"{model} is not in the Hugging Face cache", hint=offline_hint(model))
    if KV_CACHE_SHARE.search(text):
        return EngineError(
            f"not enough free memory for the KV cache asked for: {first}",
            hint="lower VLLM_CPU_KVCACHE_SPACE or --engine-arg kv_cache_memory_bytes=..., or set "
            "neither: mmrun then sizes the cache for the run",
        )
    if MEMORY_SHARE.search(text):
        return EngineError(
            f"not enough free memory for the engine: {first}",
            hint="lower --engine-arg gpu_memory_utilization=... (on vLLM's CPU backend: the "
            "share of RAM; or set VLLM_CPU_KVCACHE_SPACE=<GiB>), or free the memory other "
            "processes hold",
        )
    if OOM_PATTERNS.search(text):
        return EngineError(
            f"the engine ran out of memory: {first}",
            hint="lower --engine-arg max_model_len=... or max_num_seqs=..., raise -tp, "
            "or free the memory other processes hold",
        )
    return EngineError(f"vLLM failed: {first}", hint="rerun with -v to see vLLM's log")


# vLLM's check, at start, that the share of memory it was told to take is free (CUDA:
# vllm/v1/worker/utils.py; CPU: cpu_worker.py).
MEMORY_SHARE = re.compile(r"less than desired (?:GPU|CPU) memory utilization", re.IGNORECASE)
# vLLM's CPU worker, when the KV cache it was told to take (VLLM_CPU_KVCACHE_SPACE,
# kv_cache_memory_bytes) is more than is free.
KV_CACHE_SHARE = re.compile(r"less than requested memory for kv", re.IGNORECASE)
# huggingface_hub, asked offline for a file that is not in its cache.
NOT_CACHED = re.compile(
    r"LocalEntryNotFoundError|couldn't find them in the cached files|"
    r"Cannot find an appropriate cached snapshot"
)


def logged_root_cause() -> str | None:
    """The reason in what the engine's processes logged since the last start."""
    part = engine_log_part()  # only the log this process set up
    if part is None:
        return None
    path, start = part
    # A failing engine process may tell this one before it logs why and exits (vLLM 0.26 on
    # CUDA did): give its processes a moment to end.
    deadline = time.monotonic() + 3.0
    for child in multiprocessing.active_children():
        child.join(max(0.0, deadline - time.monotonic()))
    try:
        with open(path, "rb") as log:
            log.seek(start)
            return log_stream.root_cause(log.read().decode("utf-8", errors="replace"))
    except OSError:
        return None


def rejection_reason(message: str, exc: BaseException) -> str:
    """The line that says why: pydantic's "1 validation error for VllmConfig" header names no
    reason, the line after it does ("Value error, <why> [type=...]")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return repr(exc)
    if re.match(r"\d+ validation errors? for ", lines[0]) and len(lines) > 1:
        detail = re.sub(r"^Value error, |\s*\[type=.*$", "", lines[1])
        return f"{lines[0]}: {detail}"
    return lines[0]


def engine_is_dead(exc: BaseException) -> bool:
    """An error of the engine as a whole (its process died), not of one request."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"EngineDeadError", "EngineGenerateError"}) or bool(
        OOM_PATTERNS.search(str(exc))
    )


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first[:500]


def engine_died(exc: BaseException, exits: list[int | None]) -> EngineDied:
    """mmrun's error for an engine that stopped while generating: how its process ended
    (killed by a signal, an exit code), what it logged as the reason, and where its log is
    (kept after this process ends)."""
    ended = next((describe_exit(code) for code in exits if code), None)
    failure = engine_failure(exc)
    cause = failure.message.removeprefix("vLLM failed: ")
    if "EngineCore encountered an issue" in cause:  # vLLM's "see stack trace (above)"
        cause = "" if ended else "the engine core stopped without logging a reason"
    message = "; ".join(part for part in (ended, cause) if part)
    part = engine_log_part()
    log = None
    if part is not None:
        keep_temporary(part[0])
        log = part[0]
    hints = [failure.hint] if failure.hint and not ended else []
    hints += [f"its log: {log}"] if log else []
    return EngineDied(message, hint="; ".join(hints) or None, log=log)


def describe_exit(code: int) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if code >= 0:
        return f"the engine core process exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    text = f"the engine core process was killed by {name} (signal {-code})"
    if -code == signal.SIGKILL:
        text += ": the kernel's out-of-memory killer sends it too (see `dmesg`)"
    return text
