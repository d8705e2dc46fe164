"""Turn a loader's ModelRequest and the user's options into the exact vLLM call.

This is the one place where the parts every model shares are added: the model id, the
``trust_remote_code`` flag, the per-prompt media limits, the seed, tensor parallelism and the
user's own engine arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmrun.registry import LoaderSpec
from mmrun.request import ModelRequest

# Modalities a model is not asked to take get a limit of 0, so vLLM reserves no memory for them.
ALL_MODALITIES = ("image", "video", "audio")


def compose_engine_args(
    spec: LoaderSpec,
    request: ModelRequest,
    *,
    model: str,
    num_items: int,
    seed: int | None,
    tensor_parallel_size: int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments for ``vllm.LLM``, in a stable order."""
    args: dict[str, Any] = {"model": model}
    if spec.trust_remote_code:
        args["trust_remote_code"] = True
    args.update(request.engine_args)
    limits = {name: 0 for name in ALL_MODALITIES}
    limits[spec.modality] = num_items
    args["limit_mm_per_prompt"] = limits
    if seed is not None:
        args["seed"] = seed
    if tensor_parallel_size is not None:
        args["tensor_parallel_size"] = tensor_parallel_size
    args.update(overrides or {})
    return args
