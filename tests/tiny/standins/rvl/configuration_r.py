# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for R-4B's remote config class (RConfig), written from the fields vLLM 0.32's
rvl.py reads, through the LLaVA-OneVision model and the LLaVA-NeXT processing it builds on:

- ``vision_config``: a transformers SigLIP vision config (vLLM picks its tower by the config's
  class: SiglipVisionConfig builds its SigLIP tower; its ``hidden_size`` sizes R's projector
  and its ``image_size``/``patch_size`` the tiles and their feature grids),
  ``vision_feature_layer`` and ``vision_feature_select_strategy`` (which tower layer, all its
  patches or all but the first);
- ``text_config``: a transformers text config (here "qwen3"), built by vLLM as the language
  model; its hidden size sizes the projector and ``image_newline``;
- ``image_token_index`` (the id vLLM expands per image), ``image_grid_pinpoints`` (the
  any-resolution grids), ``projector_hidden_act`` and ``multimodal_projector_bias`` (the
  LLaVA-OneVision projector vLLM builds before R's own replaces it)."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig, SiglipVisionConfig


class RConfig(PretrainedConfig):
    model_type = "rvl"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        image_token_index: int | None = None,
        vision_feature_layer: int = -1,
        vision_feature_select_strategy: str = "full",
        image_grid_pinpoints: list[list[int]] | None = None,
        projector_hidden_act: str = "gelu",
        multimodal_projector_bias: bool = True,
        **kwargs: Any,
    ) -> None:
        if isinstance(vision_config, PretrainedConfig):
            vision_config = vision_config.to_dict()
        if isinstance(text_config, PretrainedConfig):
            text_config = text_config.to_dict()
        vision = {k: v for k, v in (vision_config or {}).items() if k != "model_type"}
        self.vision_config = SiglipVisionConfig(**vision)
        text = dict(text_config or {})
        self.text_config = AutoConfig.for_model(text.pop("model_type", "qwen3"), **text)
        self.image_token_index = image_token_index
        self.vision_feature_layer = vision_feature_layer
        self.vision_feature_select_strategy = vision_feature_select_strategy
        self.image_grid_pinpoints = image_grid_pinpoints or [[384, 384]]
        self.projector_hidden_act = projector_hidden_act
        self.multimodal_projector_bias = multimodal_projector_bias
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("vision_config", "text_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
