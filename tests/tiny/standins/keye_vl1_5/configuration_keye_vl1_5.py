# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-1.5's remote config classes, written from the fields vLLM 0.32's
keye_vl1_5.py and keye.py read. The top config is a Qwen3 text model's own (vLLM builds
Qwen3ForCausalLM from it; the projector reads its ``hidden_size``) plus ``vision_config``;
the vision config holds the SigLIP tower's fields (``hidden_size``, ``intermediate_size``,
``num_hidden_layers``, ``num_attention_heads``, ``num_channels``, ``image_size``,
``patch_size``, ``hidden_act``, ``layer_norm_eps``) and ``spatial_merge_size``, which sizes the
placeholders (the projector itself merges 2x2 patches)."""

from typing import Any

from transformers import PretrainedConfig, Qwen3Config


class KeyeVL1_5VisionConfig(PretrainedConfig):
    model_type = "KeyeVL1_5_vision"
    base_config_key = "vision_config"

    def __init__(
        self,
        hidden_size: int = 1152,
        intermediate_size: int = 4304,
        num_hidden_layers: int = 27,
        num_attention_heads: int = 16,
        num_channels: int = 3,
        image_size: int = 384,
        patch_size: int = 14,
        hidden_act: str = "gelu_pytorch_tanh",
        layer_norm_eps: float = 1e-6,
        attention_dropout: float = 0.0,
        spatial_merge_size: int = 2,
        **kwargs: Any,
    ) -> None:
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.attention_dropout = attention_dropout
        self.spatial_merge_size = spatial_merge_size
        super().__init__(**kwargs)


class KeyeVL1_5Config(Qwen3Config):
    model_type = "KeyeVL1_5"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        vision_start_token_id: int | None = None,
        vision_end_token_id: int | None = None,
        image_token_id: int | None = None,
        video_token_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        fields = vision_config if isinstance(vision_config, dict) else {}
        fields = {k: v for k, v in fields.items() if k not in ("model_type", "auto_map")}
        self.vision_config = KeyeVL1_5VisionConfig(**fields)
        self.vision_start_token_id = vision_start_token_id
        self.vision_end_token_id = vision_end_token_id
        self.image_token_id = image_token_id
        self.video_token_id = video_token_id
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        vision = getattr(self, "vision_config", None)
        out["vision_config"] = vision.to_dict() if isinstance(vision, PretrainedConfig) else vision
        return out
