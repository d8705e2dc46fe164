"""Tiny offline checkpoints of the seed models, for the end-to-end tests (see mmrun.tiny).

Each builder writes a small checkpoint of a model's real architecture into a folder. The
end-to-end tests and the proof column of docs/models.md both read :func:`builders`, so what
is claimed as proven is what is run.
"""

from __future__ import annotations

from importlib import import_module

from mmrun.tiny import Builder, selftest_builders

# The modules that hold builders, with their modality. Each exposes BUILDERS (model key ->
# Builder) and UNPROVEN (model key -> why that row has no offline proof, in one phrase).
_MODULES = (
    ("image", "tests.tiny.image"),
    ("image", "tests.tiny.upstream"),  # the keys vLLM's current example added
    ("audio", "tests.tiny.audio"),
)


def builders() -> dict[tuple[str, str], Builder]:
    """Every tiny builder, keyed by (modality, model key). The video rows run the image
    checkpoints of the same models (their processors carry the real video processors), in
    tests/e2e/test_video_e2e.py."""
    found = dict(selftest_builders())
    for modality, module in _MODULES:
        for key, builder in import_module(module).BUILDERS.items():
            found[(modality, key)] = builder
    for key in VIDEO_KEYS:
        found[("video", key)] = found[("image", key)]
    return found


VIDEO_KEYS = ("qwen2_vl", "qwen2_5_vl")


def unproven() -> dict[tuple[str, str], str]:
    """Why each seed row without a builder has no offline proof, keyed by (modality, key)."""
    return {
        (modality, key): reason
        for modality, module in _MODULES
        for key, reason in import_module(module).UNPROVEN.items()
    }
