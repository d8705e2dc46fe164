"""Tiny checkpoint of Bee (``BeeForConditionalGeneration``: LLaVA-OneVision's layout with a
projector of its own), whose config and processor classes are remote code: STAND-IN BeeConfig
and BeeProcessor classes (tests/tiny/standins/bee/) written from what vLLM reads and calls,
over transformers' LLaVA-OneVision image processor (see
:func:`tests.tiny._common.build_onevision_standin`). It proves vLLM's processor path,
placeholder expansion (Bee's own feature count) and model on the engine, not the original
classes or the real chat template.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from tests.tiny import Proof
from tests.tiny._common import build_onevision_standin


def build_bee(dest: Path) -> TinyCheckpoint:
    """Bee-8B (``BeeForConditionalGeneration``), shrunk: the real tower is a SigLIP 2 so400m
    one and the text model Qwen3-8B; the real 384-pixel tiles have 27 x 27 features and its
    grids go to 6 tiles a side. Here grids go to 4 tiles a side, with ``anyres_max_9``, so a
    large image's 16 x 16 feature grid is scaled down to fit 9 tiles' worth (the path vLLM's
    Bee counts on its own)."""
    return build_onevision_standin(
        dest,
        standins="bee",
        architecture="BeeForConditionalGeneration",
        model_type="bee",
        config_class="configuration_bee.BeeConfig",
        processor_class="processing_bee.BeeProcessor",
        max_tiles=4,
        extra_config={"vision_aspect_ratio": "anyres_max_9"},
    )


# Both methods' prompts come from the stand-in template (the loader renders the processor's).
# The image processor is transformers' LLaVA-OneVision class, an assumption: the real
# checkpoint's image processor is not known offline.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "bee"): Proof(
        build_bee,
        standin="config and processor classes, image processor, chat template",
        real_prompt=False,
    ),
}
