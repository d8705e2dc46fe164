# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Intern-S1-Pro's remote video processor class. vLLM 0.32's Qwen3-VL processing
(which interns1_pro.py runs) tells video processors from image processors with
``isinstance(..., Qwen3VLVideoProcessor)`` and reads its ``size``, ``temporal_patch_size``,
``merge_size``, ``fps`` and frame limits, so the stand-in is transformers' Qwen3-VL video
processor under the checkpoint's name (16-pixel patches, 2 frames per temporal patch, 2x2
merges: the real values)."""

from transformers import Qwen3VLVideoProcessor


class InternS1ProVideoProcessor(Qwen3VLVideoProcessor):
    pass
