"""Why HunyuanOCR has no tiny checkpoint (see tests/tiny/__init__.py)."""

from __future__ import annotations

UNPROVEN: dict[tuple[str, str], str] = {
    # vLLM runs it through its Transformers backend, which swaps transformers' linear layers
    # for its own; the tower's patch merger feeds its output projection a permuted tensor,
    # and vLLM's x86 CPU GEMM kernels (oneDNN, and SGL on AMX) need the last dimension
    # contiguous. A tiny checkpoint of transformers' own classes gets that far.
    ("image", "hunyuan_vl"): "fails on vLLM 0.32's CPU backend: the vision patch merger's "
    "projection gets a non-contiguous input ('mat1 must be contiguous at last dimension')",
}
