"""Size-aware engine settings for a run on a CUDA GPU: which configuration finishes a run of
this size soonest. Pure functions (no vLLM, no device): the plan calls them on a GPU build.

The settings and the measurements behind them (vLLM 0.26.0 on one H200, the
Qwen2.5-VL-3B-shaped model of bench/gpu with dummy weights, 448x448 images, 4 per prompt,
64 output tokens; bench/gpu/README.md):

- The vision encoder compiled (``compilation_config.compile_mm_encoder``). It runs the batch
  faster once running, but vLLM compiles it lazily, on the engine's first requests, about
  11 s after every start even from a warm compile cache, with the GPU idle meanwhile. Streamed
  through mmrun, to the last result: 1,024 prompts 0.87x, 2,048 prompts 0.98x (the gain once
  running, 1.30x and 1.12x, did not pay the compile back); at 4,096 prompts see
  ENCODER_COMPILE_MIN_IMAGES. vLLM compiles the encoder of a few architectures only; mmrun
  turns it on for those it was measured with.
- The other GPU settings are the plan's own (``size_for_a_gpu_batch``: every prompt of a
  batch in one engine step, up to 256; ``prefer_vllm_norm_kernels``: vLLM's RMSNorm kernels
  for an encoder that is not compiled) and the engine's frontend threads.
- Measured and left at vLLM's defaults, since they gained less than the run-to-run spread:
  ``max_num_batched_tokens`` 32768 (1.02x), ``mm_processor_cache_gb=0`` for distinct images
  (0.98x), prefix caching (on by default; a prompt shares only its first ~20 tokens).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Architectures whose vision encoder vLLM compiles when asked, and whose break-even below was
# measured. (vLLM 0.26 also compiles InternViT, Llama 4's and a few others': not measured.)
ENCODER_COMPILE_ARCHITECTURES = frozenset({"Qwen2_5_VLForConditionalGeneration"})
# Images per engine from which the compiled encoder finishes a run sooner (448x448 images;
# larger ones reach it with fewer, since the encoder's work grows with their pixels).
ENCODER_COMPILE_MIN_IMAGES = 10_000


@dataclass(frozen=True)
class Choice:
    """One engine setting mmrun chose for the run: the argument, its value, and why."""

    key: str
    value: Any
    why: str

    def describe(self) -> str:
        return f"{self.key}={_show(self.value)} ({self.why})"


def compile_encoder_choice(
    architecture: str,
    images_per_engine: int,
    engine_args: Mapping[str, Any],
    overrides: Mapping[str, Any],
) -> Choice | None:
    """The compiled vision encoder, for a run of at least ENCODER_COMPILE_MIN_IMAGES images
    per engine on a model of ENCODER_COMPILE_ARCHITECTURES; None where it does not pay, where
    nothing is compiled (``enforce_eager``), or where the user set ``compilation_config``."""
    if architecture not in ENCODER_COMPILE_ARCHITECTURES:
        return None
    if images_per_engine < ENCODER_COMPILE_MIN_IMAGES:
        return None
    if "compilation_config" in overrides or engine_args.get("enforce_eager") is True:
        return None
    current = engine_args.get("compilation_config")
    if current is None:
        current = {}
    if not isinstance(current, Mapping) or current.get("compile_mm_encoder") is not None:
        return None  # the model's own setting (a level, or its own choice) stands
    config = copy.deepcopy(dict(current))
    config["compile_mm_encoder"] = True
    return Choice(
        "compilation_config",
        config,
        f"{images_per_engine:,} images on one engine: the compiled vision encoder pays back "
        f"its start from {ENCODER_COMPILE_MIN_IMAGES:,}",
    )


def images_per_engine(prompts: int, per_prompt: int, engines: int) -> int:
    """The most images one engine runs: a run's prompts spread over its engines."""
    return -(-max(prompts, 0) // max(engines, 1)) * max(per_prompt, 0)


def changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The engine arguments a step set or changed, in ``after``'s order."""
    return [key for key, value in after.items() if key not in before or before[key] != value]


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
