# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for the remote config class of Phi-3.5-vision ("phi3_v"), written from the fields
vLLM 0.32's phi3v.py reads: the Phi-3 language-model fields (vLLM runs them as a Llama model)
plus two dicts, ``img_processor`` (layer_idx, image_dim_out, num_img_tokens, type_feature) and
``embd_layer`` (use_hd_transform, with_learnable_separator, hd_transform_order)."""

from typing import Any

from transformers import Phi3Config


class Phi3VConfig(Phi3Config):
    model_type = "phi3_v"

    def __init__(
        self,
        embd_layer: dict[str, Any] | None = None,
        img_processor: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.embd_layer = dict(embd_layer or {})
        self.img_processor = dict(img_processor or {})
        super().__init__(**kwargs)
