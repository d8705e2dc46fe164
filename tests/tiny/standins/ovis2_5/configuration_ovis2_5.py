# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Ovis2.5's remote config classes (model_type "ovis2_5" and its vision tower's
"siglip2_navit"), written from the fields vLLM 0.32's ovis2_5.py and siglip2navit.py read:
top ``vit_config, llm_config (text_config), visual_vocab_size, hidden_size``; tower
``hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_channels,
image_size, patch_size, temporal_patch_size, hidden_stride, hidden_act, layer_norm_eps,
attention_dropout, num_patches, preserve_original_pe, use_rope, window_size,
fullatt_block_indexes`` ("|"-separated layer indexes or None)."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig


class Siglip2NavitConfig(PretrainedConfig):
    model_type = "siglip2_navit"

    def __init__(
        self,
        hidden_size: int = 1152,
        intermediate_size: int = 4304,
        num_hidden_layers: int = 27,
        num_attention_heads: int = 16,
        num_channels: int = 3,
        image_size: int = 512,
        patch_size: int = 16,
        temporal_patch_size: int = 1,
        hidden_stride: int = 2,
        hidden_act: str = "gelu_pytorch_tanh",
        layer_norm_eps: float = 1e-6,
        attention_dropout: float = 0.0,
        num_patches: int = -1,
        preserve_original_pe: bool = True,
        use_rope: bool = True,
        window_size: int = 112,
        fullatt_block_indexes: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.image_size = image_size
        self.patch_size = patch_size
        self.temporal_patch_size = temporal_patch_size
        self.hidden_stride = hidden_stride
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.attention_dropout = attention_dropout
        self.num_patches = num_patches
        self.preserve_original_pe = preserve_original_pe
        self.use_rope = use_rope
        self.window_size = window_size
        self.fullatt_block_indexes = fullatt_block_indexes
        super().__init__(**kwargs)


class Ovis2_5Config(PretrainedConfig):
    model_type = "ovis2_5"

    def __init__(
        self,
        llm_config: dict[str, Any] | None = None,
        vit_config: dict[str, Any] | None = None,
        visual_vocab_size: int = 65536,
        hidden_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        llm = dict(llm_config) if isinstance(llm_config, dict) else {"model_type": "qwen3"}
        model_type = llm.pop("model_type", "qwen3")
        self.llm_config = self.text_config = AutoConfig.for_model(model_type, **llm)
        vit = dict(vit_config) if isinstance(vit_config, dict) else {}
        vit.pop("model_type", None)
        self.vit_config = Siglip2NavitConfig(**vit)
        self.visual_vocab_size = visual_vocab_size
        self.hidden_size = hidden_size
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("text_config", None)
        for key in ("llm_config", "vit_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
