"""vLLM's CPU build: its KV cache sized for the run when the user has not, and its compiled
model not saved where it cannot be loaded back.

Without ``VLLM_CPU_KVCACHE_SPACE``, vLLM 0.32's CPU worker reserves ``gpu_memory_utilization``
(0.92 by default) of the machine's whole memory and refuses to start when that much is not
free: on a laptop or a shared machine, a new user's first run failed with a traceback from
each engine process. The cache a run needs is known before the start: ``max_num_seqs``
sequences of ``max_model_len`` tokens, each token holding a key and a value per layer and KV
head. mmrun sets ``VLLM_CPU_KVCACHE_SPACE`` to that (in whole GiB, as vLLM reads it), within
what is free; when not even one sequence fits, it says what to lower, in one line.

vLLM 0.32's CPU build saves each compiled model for the next start (AOT compilation, its
default with torch 2.10 and later) but fails to load it back ("'function' object has no
attribute 'finalize_loading'": the CPU backend compiles without inductor), so every start
compiled the model again and saved it anew. With ``VLLM_USE_AOT_COMPILE=0`` it only traces the
model at each start: the tiny Qwen2.5-VL's one-image call took 24.8 s instead of 27.8 s
(median of 4 pairs, 2 cores). mmrun sets that on those releases unless the user set it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrun.errors import EngineError
from mmrun.support import in_releases

ENV = "VLLM_CPU_KVCACHE_SPACE"
GIB = 1 << 30
# Besides the KV cache, the engine's processes hold the weights, activations, the multimodal
# encoder's buffers and the Python heaps: what is left free for them.
HEADROOM_BYTES = 2 * GIB
# vLLM hands out KV memory in blocks and keeps a little for itself.
MARGIN = 1.1
AOT_ENV = "VLLM_USE_AOT_COMPILE"
AOT_UNLOADABLE = ((0, 32), (0, 33))  # from, before: the releases seen to fail the load


@dataclass(frozen=True)
class Choice:
    """What mmrun chose: ``gib`` for VLLM_CPU_KVCACHE_SPACE, and why, in words."""

    gib: int
    reason: str


def bytes_per_token(text_config: Any, engine_args: Mapping[str, Any]) -> int | None:
    """A token's keys and values across the layers, or None where the config does not say."""
    layers = getattr(text_config, "num_hidden_layers", None)
    heads = getattr(text_config, "num_attention_heads", None)
    kv_heads = getattr(text_config, "num_key_value_heads", None) or heads
    head_dim = getattr(text_config, "head_dim", None)
    hidden = getattr(text_config, "hidden_size", None)
    if not head_dim and hidden and heads:
        head_dim = hidden // heads
    if not (isinstance(layers, int) and isinstance(kv_heads, int) and isinstance(head_dim, int)):
        return None
    return 2 * layers * kv_heads * head_dim * _dtype_bytes(text_config, engine_args)


def _dtype_bytes(text_config: Any, engine_args: Mapping[str, Any]) -> int:
    cache = str(engine_args.get("kv_cache_dtype") or "auto")
    if cache.startswith("fp8"):
        return 1
    dtype = str(engine_args.get("dtype") or getattr(text_config, "dtype", None) or "")
    return 4 if "float32" in dtype or dtype == "float" else 2


def choose(per_token: int, max_model_len: int, max_num_seqs: int, free_bytes: int) -> Choice:
    """VLLM_CPU_KVCACHE_SPACE for ``max_num_seqs`` sequences of ``max_model_len`` tokens,
    within ``free_bytes``; EngineError when not even one sequence fits."""
    budget = free_bytes - HEADROOM_BYTES
    one = per_token * max_model_len * MARGIN
    wanted = one * max_num_seqs
    if one > budget:
        fits = max(0, int(budget / (per_token * MARGIN)))
        raise EngineError(
            f"the KV cache of one sequence of max_model_len={max_model_len} tokens needs "
            f"{one / GIB:.1f} GiB, and {max(budget, 0) / GIB:.1f} GiB of memory is free "
            f"beside the engine's {HEADROOM_BYTES // GIB} GiB",
            hint=f"lower --engine-arg max_model_len=... (about {fits} tokens fit now), or free "
            f"memory; {ENV}=<GiB> sets the cache size yourself",
        )
    gib = max(1, math.ceil(min(wanted, budget) / GIB))
    if gib * GIB > budget:  # whole GiB only: the largest that fits
        gib = max(1, int(budget // GIB))
    sequences = min(max_num_seqs, int(gib * GIB / one))
    reason = (
        f"{max_num_seqs} x {max_model_len} tokens x {per_token:,} bytes need "
        f"{wanted / GIB:.2f} GiB; {budget / GIB:.1f} GiB free"
    )
    if sequences < max_num_seqs:
        reason += f": room for {sequences} full-length sequences at once"
    return Choice(gib, reason)


def free_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def size_for_the_run(engine_args: Mapping[str, Any]) -> Choice | None:
    """On vLLM's CPU build, set VLLM_CPU_KVCACHE_SPACE for this run unless the user chose the
    cache's size (the variable, ``kv_cache_memory_bytes``) or the share of memory vLLM takes
    (``gpu_memory_utilization``). What was chosen, or None where nothing was."""
    if os.environ.get(ENV, "") != "" or any(
        key in engine_args for key in ("kv_cache_memory_bytes", "gpu_memory_utilization")
    ):
        return None
    text_config = _text_config(engine_args)
    per_token = bytes_per_token(text_config, engine_args) if text_config is not None else None
    max_model_len = engine_args.get("max_model_len") or getattr(
        text_config, "max_position_embeddings", None
    )
    if per_token is None or not isinstance(max_model_len, int):
        return None  # vLLM's own sizing, and its own message if that fails
    max_num_seqs = int(engine_args.get("max_num_seqs") or 256)
    free = free_memory() - _weights_bytes(engine_args)
    choice = choose(per_token, max_model_len, max_num_seqs, free)
    os.environ[ENV] = str(choice.gib)
    return choice


def _text_config(engine_args: Mapping[str, Any]) -> Any:
    """The language model's config, from the local folder or the Hugging Face cache (never
    the network: vLLM's start fetches what is missing, and reports it)."""
    model = engine_args.get("model")
    if not isinstance(model, str):
        return None
    try:
        import transformers

        config = transformers.AutoConfig.from_pretrained(
            model,
            trust_remote_code=bool(engine_args.get("trust_remote_code")),
            revision=engine_args.get("revision"),
            local_files_only=True,
        )
    except Exception:  # any reason: vLLM's start reads the config itself and says why
        return None
    overrides = engine_args.get("hf_overrides")
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            if hasattr(text, key) and not isinstance(value, Mapping):
                setattr(text, key, value)
    return text


def _weights_bytes(engine_args: Mapping[str, Any]) -> int:
    """The checkpoint's weight files (the engine holds them in memory), 0 where unknown or
    where vLLM makes up the weights (``load_format="dummy"``)."""
    model = engine_args.get("model")
    if not isinstance(model, str) or engine_args.get("load_format") == "dummy":
        return 0
    folder = Path(model).expanduser()
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(
                model, "config.json", revision=engine_args.get("revision")
            )
        except Exception:  # an id huggingface_hub refuses: nothing to measure
            return 0
        if not isinstance(found, str):
            return 0
        folder = Path(found).parent
    total = 0
    for path in folder.glob("*"):
        if path.suffix in (".safetensors", ".bin", ".pt", ".gguf"):
            try:
                total += path.stat().st_size  # follows the cache's links to the blobs
            except OSError:
                continue
    return total


def no_unloadable_compile_cache(version: str | None, environ: Mapping[str, str]) -> bool:
    """Whether a CPU build of this vLLM ``version`` gets VLLM_USE_AOT_COMPILE=0 (a release in
    AOT_UNLOADABLE, and the user has not set the variable in ``environ``)."""
    return version is not None and AOT_ENV not in environ and in_releases(version, AOT_UNLOADABLE)


def prepare_the_cpu_start(engine_args: Mapping[str, Any], *, say: bool | None = None) -> None:
    """On vLLM's CPU build: VLLM_CPU_KVCACHE_SPACE for this run, and VLLM_USE_AOT_COMPILE=0
    where the release cannot load its saved compilation, unless the user set them; said on
    stderr with -v (``say``: whether to say it; None: unless the run is quiet)."""
    from mmrun.engine.environment import is_quiet
    from mmrun.support import vllm_device, vllm_version

    if vllm_device() != "cpu":
        return
    if say is None:
        say = not is_quiet()
    choice = size_for_the_run(engine_args)
    if choice is not None and say:
        print(f"mmrun: {ENV}={choice.gib} (GiB) for this run: {choice.reason}", file=sys.stderr)
    version = vllm_version()
    if no_unloadable_compile_cache(version, os.environ):
        os.environ[AOT_ENV] = "0"
        if say:
            print(
                f"mmrun: {AOT_ENV}=0 for this run: vLLM {version}'s CPU build cannot load the "
                "compiled model it saves, so it would compile it again at every start",
                file=sys.stderr,
            )
