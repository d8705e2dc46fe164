# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Intern-S1-Pro's remote processor class, written from what vLLM 0.32's
interns1_pro.py uses: it runs Qwen3-VL's multimodal processor over the checkpoint's own
processor, so the processor takes ``text``, ``images`` and ``videos`` as Qwen3-VL's does and
returns ``pixel_values``/``image_grid_thw`` and ``pixel_values_videos``/``video_grid_thw``
(vLLM expands ``<|image_pad|>`` and ``<|video_pad|>`` itself from the grids). transformers'
Qwen3-VL processor does exactly this; the stand-in is that class under the checkpoint's name,
over a Qwen2-VL image processor and the stand-in video processor."""

from transformers import Qwen3VLProcessor


class InternS1ProProcessor(Qwen3VLProcessor):
    pass
