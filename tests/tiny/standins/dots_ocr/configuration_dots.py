# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for dots.ocr's remote config class: vLLM 0.32 ships DotsOCRConfig (and
DotsVisionConfig) in vllm/transformers_utils/configs/dotsocr.py but does not register them for
the model type "dots_ocr", so the checkpoint names them through ``auto_map`` and this module
hands over vLLM's own classes. vLLM's dots_ocr.py checks the class name (DotsOCRConfig)."""

from vllm.transformers_utils.configs.dotsocr import DotsOCRConfig, DotsVisionConfig

__all__ = ["DotsOCRConfig", "DotsVisionConfig"]
