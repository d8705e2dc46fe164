"""GPU defaults: what mmrun changes on a GPU build of vLLM and why (each measured; see
docs/performance.md): torch's frontend threads, the batch size of a large run, and vLLM's
own RMSNorm kernels. Nothing here applies to vLLM's CPU build."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from mmrun.engine.environment import use_threads

FRONTEND_THREADS_MAX = 8


def frontend_threads(cores: int, sharers: int) -> int:
    """One engine's share of ``cores`` split between ``sharers``: at least 1, at most
    FRONTEND_THREADS_MAX (what vLLM's request processing gains from, measured on the H200)."""
    return max(1, min(FRONTEND_THREADS_MAX, cores // max(1, sharers)))


def use_frontend_threads(engines_on_host: int = 1) -> int | None:
    """Size torch's threads for a GPU engine, before it starts: OMP_NUM_THREADS, which the
    engine's processes inherit, up to FRONTEND_THREADS_MAX, sharing the cores this process may
    use with the other engines on the host. Two measured effects on the H200 (see
    docs/performance.md): vLLM's frontend processes each request's images and audio with
    OMP_NUM_THREADS torch threads, 1 when unset, which bounded a batch's throughput; and an
    engine core left with torch's default (every core) kept the host's CPUs busy, so that two
    engines on one host ran no faster than one. Not on vLLM's CPU build (the engine uses the
    cores), and not when the user set OMP_NUM_THREADS. The number of threads set, or None."""
    from mmrun.support import vllm_device

    if os.environ.get("OMP_NUM_THREADS") or vllm_device() != "gpu":
        return None
    threads = frontend_threads(len(os.sched_getaffinity(0)), engines_on_host)
    # vLLM (0.26 to 0.32 at least) runs each request's multimodal processor inside
    # set_default_torch_num_threads(), which sets torch's threads to OMP_NUM_THREADS, or 1 when
    # it is unset, whatever torch was set to: the variable is what counts, here and in the
    # engine core's process, which inherits it.
    use_threads(threads)
    return threads


def users_gpu_threads() -> int | None:
    """The user's own OMP_NUM_THREADS on a GPU build, when it asks for more than one thread
    (mmrun keeps it, and still keeps vLLM's start from hanging on it: one_thread_until_forked)."""
    from mmrun.support import vllm_device

    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return threads if threads > 1 and vllm_device() == "gpu" else None


# How many prompts a GPU engine runs at once when a run has more prompts than the model's own
# max_num_seqs: the smallest of these sizes that holds the whole run, at most the last. The
# seed scripts' values (2 to 5) size one prompt's demo for a small GPU; a batch held to them
# leaves a GPU mostly idle. vLLM captures CUDA graphs for batches up to min(2 x max_num_seqs,
# 512), and those sizes are part of its compile cache's key: two sizes, so at most two
# compile caches per model. 256 is vLLM's own offline default on most GPUs and gives the same
# graphs, so the same cache, as its default of 1,024 on an H100 or H200; 64 captures 19 graphs
# instead of 51 and starts sooner (measured on an H200; see docs/performance.md).
GPU_BATCH_SIZES = (64, 256)


def size_for_a_gpu_batch(
    engine_args: dict[str, Any], prompts: int, overrides: Mapping[str, Any]
) -> None:
    """On a GPU, let a run of more prompts than the model's own ``max_num_seqs`` run them
    all at once, in one of GPU_BATCH_SIZES (64 or 256), unless the user named
    ``max_num_seqs``. A run of fewer prompts keeps the model's setting (and its compile
    cache); a model without one keeps vLLM's default."""
    own = engine_args.get("max_num_seqs")
    # 1: the model runs one prompt at a time (vLLM cannot batch its rows, e.g. kimi_audio).
    if "max_num_seqs" in overrides or not isinstance(own, int) or own == 1 or prompts <= own:
        return
    size = next((s for s in GPU_BATCH_SIZES if prompts <= s), GPU_BATCH_SIZES[-1])
    engine_args["max_num_seqs"] = max(own, size)


# vLLM's own CUDA kernels for RMSNorm, first everywhere in the model. When vLLM compiles the
# language model (its default on a GPU) it picks its plain PyTorch RMSNorm ("native") for
# Inductor to fuse. A vision encoder that vLLM does not compile runs that plain version as it
# is: about nine float32 kernels per norm, two norms per block, where vLLM's kernel is one
# ("vllm_c", what vLLM itself picks when nothing is compiled). Measured on an H200 with the
# Qwen2.5-VL-3B shape, 256 prompts x 4 images: the vision encoder's GPU time 20% lower, the
# language model's unchanged, 1.16x the prompts/s (see docs/performance.md). Not
# bit-identical: the fused add-and-norm kernel rounds the sum to the model's dtype before
# normalizing it. ir_op_priority is an engine argument since vLLM 0.26 at the
# latest (measured there); ROCm picks its own kernels.
VLLM_NORM_KERNELS: dict[str, list[str]] = {
    "rms_norm": ["vllm_c", "native"],
    "fused_add_rms_norm": ["vllm_c", "native"],
}
NORM_KERNELS_SINCE = (0, 26)


def prefer_vllm_norm_kernels(
    engine_args: dict[str, Any], overrides: Mapping[str, Any], version: str | None
) -> None:
    """On a CUDA build of vLLM >= 0.26, let vLLM's CUDA RMSNorm kernels come first
    (``ir_op_priority``), unless the user chose kernels (``ir_op_priority``,
    ``kernel_config``), nothing is compiled (``enforce_eager``: vLLM picks them itself) or the
    vision encoder is compiled too (Inductor fuses its norms then)."""
    if version is None or "rocm" in version or _release(version) < NORM_KERNELS_SINCE:
        return
    if "ir_op_priority" in overrides or "kernel_config" in overrides:
        return
    compilation = engine_args.get("compilation_config")
    if engine_args.get("enforce_eager") is True or (
        isinstance(compilation, Mapping) and compilation.get("compile_mm_encoder")
    ):
        return
    engine_args["ir_op_priority"] = copy.deepcopy(VLLM_NORM_KERNELS)


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version: "0.26.0+cu130" -> (0, 26, 0); "0.27.0rc1" -> (0, 27)."""
    numbers = []
    for part in version.split("+")[0].split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def apply_gpu_defaults(
    engine_args: dict[str, Any], prompts: int, overrides: Mapping[str, Any], version: str | None
) -> None:
    """Everything this module changes in a GPU run's engine arguments (``prompts``: the run's
    prompt count; ``overrides``: the user's own engine arguments, which always win)."""
    size_for_a_gpu_batch(engine_args, prompts, overrides)
    prefer_vllm_norm_kernels(engine_args, overrides, version)
