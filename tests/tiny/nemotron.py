"""Why NVIDIA's Nemotron rows have no tiny checkpoint (see tests/tiny/__init__.py)."""

from __future__ import annotations

UNPROVEN: dict[tuple[str, str], str] = {
    ("image", "nemotron_parse_35"): "vLLM 0.32 runs the checkpoint's remote config and "
    "processor classes (Nemotron Parse); no public copy with a named source was found",
    ("image", "nemotron_vl"): "vLLM 0.32 builds the vision tower from the checkpoint's remote "
    "C-RADIO model (AutoModel) and the image processor from remote code; the config class "
    "loads C-RADIO's config class from another Hub repository (nvidia/C-RADIOv2-H)",
}
