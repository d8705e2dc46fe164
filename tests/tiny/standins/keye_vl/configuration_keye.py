# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-8B-Preview's remote config classes (model_type "Keye"), written from
the fields vLLM 0.32's keye.py reads: the top config is the Qwen3 text model's own (vLLM
builds Qwen3ForCausalLM from it) plus the vision token ids and ``vision_config``; the vision
config is a SigLIP tower's fields plus ``spatial_merge_size`` (the projector merges 2x2
patches), ``temporal_patch_size`` and ``tokens_per_second``."""

from typing import Any

from transformers import PretrainedConfig, Qwen3Config


class KeyeVisionConfig(PretrainedConfig):
    model_type = "Keye"
    base_config_key = "vision_config"

    def __init__(
        self,
        hidden_size: int = 768,
        intermediate_size: int = 3072,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        num_channels: int = 3,
        image_size: int = 224,
        patch_size: int = 14,
        hidden_act: str = "gelu_pytorch_tanh",
        layer_norm_eps: float = 1e-6,
        attention_dropout: float = 0.0,
        spatial_merge_size: int = 2,
        temporal_patch_size: int = 2,
        tokens_per_second: int = 2,
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
        self.temporal_patch_size = temporal_patch_size
        self.tokens_per_second = tokens_per_second
        super().__init__(**kwargs)


class KeyeConfig(Qwen3Config):
    model_type = "Keye"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        vision_start_token_id: int | None = None,
        vision_end_token_id: int | None = None,
        vision_token_id: int | None = None,
        image_token_id: int | None = None,
        video_token_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        vision = vision_config if isinstance(vision_config, dict) else {}
        vision = {k: v for k, v in vision.items() if k not in ("model_type", "auto_map")}
        self.vision_config = KeyeVisionConfig(**vision)
        self.vision_start_token_id = vision_start_token_id
        self.vision_end_token_id = vision_end_token_id
        self.vision_token_id = vision_token_id
        self.image_token_id = image_token_id
        self.video_token_id = video_token_id
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        value = getattr(self, "vision_config", None)
        out["vision_config"] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
