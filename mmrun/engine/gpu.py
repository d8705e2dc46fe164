"""GPU defaults: what mmrun changes on a GPU build of vLLM, and why: torch's frontend
threads, the batch size of a large run, vLLM's own RMSNorm kernels, the compiled vision
encoder for a run large enough to pay for it, and on vLLM 0.26 the model runner that runs the
vision encoder while the engine starts. Each was measured, and so were the settings left at
vLLM's defaults (docs/performance.md, "Defaults on a GPU, and why"). The user's own engine
arguments and environment always win. Nothing here applies to vLLM's CPU build.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from typing import Any

from mmrun.engine.environment import use_threads
from mmrun.support import in_releases, release_numbers

FRONTEND_THREADS_MAX = 8


def frontend_threads(cores: int, sharers: int) -> int:
    """One engine's share of ``cores`` split between ``sharers``: at least 1, at most
    FRONTEND_THREADS_MAX (as many as vLLM's request processing gains from)."""
    return max(1, min(FRONTEND_THREADS_MAX, cores // max(1, sharers)))


def chosen_frontend_threads(engines_on_host: int = 1) -> int | None:
    """The torch threads a GPU engine's frontend gets (use_frontend_threads), without setting
    them: None on vLLM's CPU build and when the user set OMP_NUM_THREADS."""
    from mmrun.support import vllm_device

    if os.environ.get("OMP_NUM_THREADS") or vllm_device() != "gpu":
        return None
    return frontend_threads(len(os.sched_getaffinity(0)), engines_on_host)


def use_frontend_threads(engines_on_host: int = 1) -> int | None:
    """Size torch's threads for a GPU engine, before it starts: OMP_NUM_THREADS, which the
    engine's processes inherit, up to FRONTEND_THREADS_MAX, sharing the cores this process may
    use with the other engines on the host. vLLM's frontend processes each request's images
    and audio with OMP_NUM_THREADS torch threads, 1 when unset, which bounds a batch's
    throughput; an engine core left with torch's default (every core) keeps the host's CPUs
    busy, so that two engines on one host run no faster than one. Not on vLLM's CPU build (the
    engine uses the cores), and not when the user set OMP_NUM_THREADS. The number of threads
    set, or None."""
    threads = chosen_frontend_threads(engines_on_host)
    if threads is None:
        return None
    # vLLM (0.26 to 0.32 at least) runs each request's multimodal processor inside
    # set_default_torch_num_threads(), which sets torch's threads to OMP_NUM_THREADS, or 1 when
    # it is unset, whatever torch was set to: the variable is what counts, here and in the
    # engine core's process, which inherits it.
    use_threads(threads)
    return threads


# `mmrun serve`'s API-server processes on a GPU: vLLM's server prepares each request's media
# (decoding, the model's processor) in the API-server process that took it, and one process
# keeps a GPU waiting. Measured on an H100 with 16 cores (Qwen2.5-VL-3B shape, 512 prompts x 4
# pictures): `--server` ran at 0.70x and 0.82x the rate of mmrun's own engine with one process,
# 1.00x and 1.05x with four. Each takes a share of the cores for its torch threads.
CORES_PER_API_SERVER = 4
API_SERVERS_MAX = 4


def api_servers_for(cores: int) -> int:
    """API-server processes for a host of ``cores`` cores: one per CORES_PER_API_SERVER, at
    least 1, at most API_SERVERS_MAX."""
    return max(1, min(API_SERVERS_MAX, cores // CORES_PER_API_SERVER))


def chosen_api_servers() -> int:
    """`mmrun serve`'s API-server processes unless --api-servers says: api_servers_for the
    cores this process may use on a GPU build; 1 on vLLM's CPU build, whose engine uses the
    cores (two gave nothing on 2 cores)."""
    from mmrun.support import vllm_device

    if vllm_device() != "gpu":
        return 1
    return api_servers_for(len(os.sched_getaffinity(0)))


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
# max_num_seqs: the smallest of these sizes that holds the whole run, at most the last. vLLM's
# examples set 2 to 5, for one prompt on a small GPU, which leaves a GPU mostly idle in a
# batch. The size is part of vLLM's compile cache's key: two sizes, two caches per model.
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


# vLLM's own CUDA kernels for RMSNorm, first everywhere in the model: where vLLM compiles the
# language model it picks its plain PyTorch RMSNorm for Inductor to fuse, and a vision encoder
# it does not compile then runs that as is, many small kernels per norm where vLLM's is one.
# Not bit-identical: the fused add-and-norm kernel rounds the sum to the model's dtype before
# normalizing it. An engine argument since vLLM 0.26 at the latest; ROCm picks its own.
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
    if version is None or "rocm" in version or release_numbers(version) < NORM_KERNELS_SINCE:
        return
    if "ir_op_priority" in overrides or "kernel_config" in overrides:
        return
    compilation = engine_args.get("compilation_config")
    if engine_args.get("enforce_eager") is True or (
        isinstance(compilation, Mapping) and compilation.get("compile_mm_encoder")
    ):
        return
    engine_args["ir_op_priority"] = copy.deepcopy(VLLM_NORM_KERNELS)


# The compiled vision encoder (``compilation_config.compile_mm_encoder``) runs a batch faster,
# but compiling it costs every start about 11 s, even from a warm compile cache: a run pays
# that back from about 10,800 images per engine, and 12,000 leaves a margin for the spread of
# a start. Only for the architecture it was measured with (vLLM compiles a few encoders).
ENCODER_COMPILE_ARCHITECTURES = frozenset({"Qwen2_5_VLForConditionalGeneration"})
ENCODER_COMPILE_MIN_IMAGES = 12_000


def images_per_engine(prompts: int, per_prompt: int, engines: int) -> int:
    """The most images one engine runs: a run's prompts spread over its engines."""
    return -(-max(prompts, 0) // max(engines, 1)) * max(per_prompt, 0)


def compile_the_encoder(
    engine_args: dict[str, Any], architecture: str, images: int, overrides: Mapping[str, Any]
) -> str | None:
    """Ask vLLM to compile the vision encoder of a run of at least ENCODER_COMPILE_MIN_IMAGES
    ``images`` per engine on a model of ENCODER_COMPILE_ARCHITECTURES, unless the user set
    ``compilation_config``, nothing is compiled (``enforce_eager``) or the model's own
    settings decide it. Why it was chosen, or None."""
    if architecture not in ENCODER_COMPILE_ARCHITECTURES or images < ENCODER_COMPILE_MIN_IMAGES:
        return None
    if "compilation_config" in overrides or engine_args.get("enforce_eager") is True:
        return None
    current = engine_args.get("compilation_config")
    current = {} if current is None else current
    if not isinstance(current, Mapping) or current.get("compile_mm_encoder") is not None:
        return None
    engine_args["compilation_config"] = {**copy.deepcopy(dict(current)), "compile_mm_encoder": True}
    return (
        f"{images:,} images on one engine: the compiled vision encoder pays back its start "
        f"from {ENCODER_COMPILE_MIN_IMAGES:,}"
    )


# vLLM's V1 model runner for a vision-language model on vLLM 0.26, whose default V2 runner runs
# no vision encoder while the engine starts: the encoder's first run (and compile) would wait
# for the first requests, with the GPU idle, where the V1 runner does it during the start.
# From vLLM 0.27 the V2 runner runs the encoder at its start too: the runner is left to vLLM.
V1_RUNNER_ARCHITECTURES = frozenset({"Qwen2_5_VLForConditionalGeneration"})
V1_RUNNER_RELEASES = ((0, 26), (0, 27))  # from, before
RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def choose_the_model_runner(
    architecture: str, version: str | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The environment that starts a model of V1_RUNNER_ARCHITECTURES on vLLM's V1 model
    runner, on a CUDA build of vLLM in V1_RUNNER_RELEASES, unless the user chose the runner
    (VLLM_USE_V2_MODEL_RUNNER in ``environ``); else nothing."""
    if architecture not in V1_RUNNER_ARCHITECTURES or version is None or "rocm" in version:
        return {}
    if not in_releases(version, V1_RUNNER_RELEASES) or RUNNER_ENV in environ:
        return {}
    return {RUNNER_ENV: "0"}


def apply_gpu_defaults(
    engine_args: dict[str, Any],
    prompts: int,
    overrides: Mapping[str, Any],
    version: str | None,
    *,
    architecture: str = "",
    per_prompt: int = 1,
    engines: int = 1,
    environ: Mapping[str, str] | None = None,
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Everything this module changes in a GPU run's engine arguments (``prompts``: the run's
    prompt count, each with at most ``per_prompt`` media items, spread over ``engines``;
    ``overrides``: the user's own engine arguments, which always win; ``environ``: the
    environment the engine will start in, os.environ by default). What was chosen and why,
    one ``KEY=VALUE (why)`` line each, for --verbose and --dry-run; and the environment
    variables the engine's start needs for it (none that ``environ`` sets already)."""
    environ = os.environ if environ is None else environ
    before = copy.deepcopy(engine_args)
    size_for_a_gpu_batch(engine_args, prompts, overrides)
    why = {
        "max_num_seqs": f"{prompts:,} prompts: up to that many run together "
        f"(the model's own setting is {before.get('max_num_seqs')})",
        "ir_op_priority": "vLLM's CUDA RMSNorm kernels for what vLLM does not compile, "
        "such as a vision encoder",
    }
    images = images_per_engine(prompts, per_prompt, engines)
    encoder = compile_the_encoder(engine_args, architecture, images, overrides)
    if encoder is not None:
        why["compilation_config"] = encoder
    prefer_vllm_norm_kernels(engine_args, overrides, version)
    env = choose_the_model_runner(architecture, version, environ)
    chosen = [
        f"{key}={_show(value)} ({why.get(key, 'a GPU default')})"
        for key, value in engine_args.items()
        if key not in before or before[key] != value
    ]
    chosen += [
        f"{name}={value} (an environment variable: vLLM {version}'s V1 model runner, which "
        "runs the vision encoder while the engine starts, not after)"
        for name, value in env.items()
    ]
    return tuple(chosen), env


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
