# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for ERNIE-4.5-VL's remote config classes (model_type "ernie4_5_moe_vl"), written
from the fields vLLM 0.32's ernie45_vl.py and ernie45_vl_moe.py read: a flat text config (the
MoE fields are pairs, text experts then vision experts), the vision token ids, the resampler's
``pixel_hidden_size``/``spatial_conv_size``/``temporal_conv_size``/``use_temporal_conv``, and
``vision_config`` with the vision tower's ``embed_dim``/``hidden_size``/``depth``/
``num_heads``/``mlp_ratio``/``patch_size``/``spatial_merge_size``/``in_channels``."""

from typing import Any

from transformers import PretrainedConfig


class DFNRopeVisionTransformerConfig(PretrainedConfig):
    model_type = "DFNRope_vision_transformer"
    base_config_key = "vision_config"

    def __init__(
        self,
        depth: int = 32,
        embed_dim: int = 1280,
        hidden_size: int = 1280,
        num_heads: int = 16,
        mlp_ratio: float = 4.0,
        in_channels: int = 3,
        patch_size: int = 14,
        spatial_merge_size: int = 2,
        **kwargs: Any,
    ) -> None:
        self.depth = depth
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.mlp_ratio = mlp_ratio
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size
        super().__init__(**kwargs)


class Ernie4_5_VLMoEConfig(PretrainedConfig):
    model_type = "ernie4_5_moe_vl"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        vocab_size: int = 103424,
        hidden_size: int = 2560,
        intermediate_size: int = 12288,
        num_hidden_layers: int = 28,
        num_attention_heads: int = 20,
        num_key_value_heads: int = 4,
        head_dim: int | None = None,
        max_position_embeddings: int = 131072,
        hidden_act: str = "silu",
        rms_norm_eps: float = 1e-5,
        rope_theta: float = 500000.0,
        freq_allocation: int = 20,
        use_bias: bool = False,
        tie_word_embeddings: bool = True,
        moe_num_experts: list[int] | None = None,
        moe_num_shared_experts: int = 2,
        moe_k: int = 6,
        moe_intermediate_size: list[int] | None = None,
        moe_layer_start_index: list[int] | None = None,
        moe_layer_end_index: list[int] | None = None,
        moe_layer_interval: int = 1,
        pixel_hidden_size: int = 1280,
        spatial_conv_size: int = 2,
        temporal_conv_size: int = 2,
        use_temporal_conv: bool = True,
        im_patch_id: int | None = None,
        image_start_token_id: int | None = None,
        image_end_token_id: int | None = None,
        video_start_token_id: int | None = None,
        video_end_token_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(vision_config, DFNRopeVisionTransformerConfig):
            vision_config = DFNRopeVisionTransformerConfig(**(vision_config or {}))
        self.vision_config = vision_config
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.max_position_embeddings = max_position_embeddings
        self.hidden_act = hidden_act
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.freq_allocation = freq_allocation
        self.use_bias = use_bias
        self.moe_num_experts = moe_num_experts or [64, 64]
        self.moe_num_shared_experts = moe_num_shared_experts
        self.moe_k = moe_k
        self.moe_intermediate_size = moe_intermediate_size or [1536, 512]
        self.moe_layer_start_index = moe_layer_start_index or [1, 1]
        self.moe_layer_end_index = moe_layer_end_index or [
            num_hidden_layers - 1,
            num_hidden_layers - 1,
        ]
        self.moe_layer_interval = moe_layer_interval
        self.pixel_hidden_size = pixel_hidden_size
        self.spatial_conv_size = spatial_conv_size
        self.temporal_conv_size = temporal_conv_size
        self.use_temporal_conv = use_temporal_conv
        self.im_patch_id = im_patch_id
        self.image_start_token_id = image_start_token_id
        self.image_end_token_id = image_end_token_id
        self.video_start_token_id = video_start_token_id
        self.video_end_token_id = video_end_token_id
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
