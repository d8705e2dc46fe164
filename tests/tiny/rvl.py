"""Tiny checkpoint of R-4B (``RForConditionalGeneration``: LLaVA-OneVision's layout with a
projector of its own), whose config and processor classes are remote code: STAND-IN RConfig
and RProcessor classes (tests/tiny/standins/rvl/) written from what vLLM reads and calls, over
transformers' LLaVA-OneVision image processor (see
:func:`tests.tiny._common.build_onevision_standin`). It proves vLLM's processor path,
placeholder expansion and model on the engine, not the original classes or the real chat
template.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from tests.tiny import Proof
from tests.tiny._common import build_onevision_standin


def build_rvl(dest: Path) -> TinyCheckpoint:
    """R-4B (``RForConditionalGeneration``), shrunk: the real tower is a SigLIP so400m one and
    the text model Qwen3-4B (R-4B's thinking mode is its ``<think>`` block); the real
    384-pixel tiles have 27 x 27 features. Here grids go to 3 tiles a side."""
    return build_onevision_standin(
        dest,
        standins="rvl",
        architecture="RForConditionalGeneration",
        model_type="rvl",
        config_class="configuration_r.RConfig",
        processor_class="processing_r.RProcessor",
        max_tiles=3,
    )


# Both methods' prompts come from the stand-in template (the loader renders the processor's).
# The image processor is transformers' LLaVA-OneVision class, an assumption: the real
# checkpoint's image processor is not known offline.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "rvl"): Proof(
        build_rvl,
        standin="config and processor classes, image processor, chat template",
        real_prompt=False,
    ),
}
