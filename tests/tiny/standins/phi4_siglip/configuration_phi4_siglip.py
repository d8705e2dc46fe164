# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-4-reasoning-vision's remote config class, written from the fields vLLM
0.32's phi4siglip.py (Phi4ForCausalLMV) reads: the top config is the Phi-3 text model's own
(vLLM builds Phi3ForCausalLM from it) plus

- ``vision_config``: the SigLIP 2 NaFlex tower's fields, kept as a plain dict (vLLM builds a
  transformers Siglip2VisionConfig from it, ``patch_size`` 16 where absent; ``num_patches`` is
  the side of its square position table, squared);
- ``mm_hidden_size``: the tower's width, the projector's input;
- ``max_num_patches`` and ``min_num_patches``: the most and fewest patches vLLM counts an image
  at when it sizes its profiling image and its token budget.

The model type is this stand-in's own."""

from typing import Any

from transformers import Phi3Config


class Phi4SiglipConfig(Phi3Config):
    model_type = "phi4_siglip"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        mm_hidden_size: int | None = None,
        max_num_patches: int = 3600,
        min_num_patches: int = 256,
        **kwargs: Any,
    ) -> None:
        self.vision_config = dict(vision_config or {})
        self.mm_hidden_size = mm_hidden_size
        self.max_num_patches = max_num_patches
        self.min_num_patches = min_num_patches
        super().__init__(**kwargs)
