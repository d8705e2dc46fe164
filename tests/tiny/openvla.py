"""Why OpenVLA has no tiny checkpoint yet (see tests/tiny/__init__.py)."""

from __future__ import annotations

# vLLM 0.32 has OpenVLA's model, config and processor classes (its model file is 0.34's); only
# the chat template, which mmrun's hand-written prompt does without, came in 0.34.
UNPROVEN: dict[tuple[str, str], str] = {
    (
        "image",
        "openvla",
    ): "not built yet: vLLM 0.32 has the architecture; no tiny checkpoint written",
}
