# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-4-multimodal's remote config class ("phi4mm"), written from the fields
vLLM 0.32's phi4mm.py and phi4mm_audio.py read: the Phi-4-mini text model's own fields (vLLM
runs them as a Llama model) plus

- ``img_processor``: the vision tower's name, a key of vLLM's table of tower geometries, or
  None for its default (the SigLIP so400m tower at 448 pixels, built from a hard-coded config);
- ``embd_layer``: a dict whose ``audio_embd_layer`` dict holds the audio embedding's settings
  (``compression_rate``: audio frames per token; ``downsample_rate``, ``projection_cls``,
  ``use_qformer``, ``use_conv_downsample``);
- ``audio_processor``: ``{"name": "cascades", "config": {...}}``, the conformer encoder's
  keyword arguments.

The LoRA adapters' settings are not read by vLLM (it reads each adapter's own
adapter_config.json), so they are not fields here."""

from typing import Any

from transformers import Phi3Config


class Phi4MMConfig(Phi3Config):
    model_type = "phi4mm"

    def __init__(
        self,
        img_processor: str | None = None,
        embd_layer: dict[str, Any] | None = None,
        audio_processor: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.img_processor = img_processor
        self.embd_layer = dict(embd_layer or {})
        self.audio_processor = dict(audio_processor or {})
        super().__init__(**kwargs)
