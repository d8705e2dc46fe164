# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo2's remote config classes (Molmo2Config, model type "molmo2"), written from
the fields vLLM 0.32's molmo2.py reads:

- ``vit_config``: the vision transformer's sizes (hidden, intermediate, layers, heads, kv
  heads, head_dim), hidden_act, layer_norm_eps, image_default_input_size, image_patch_size and
  image_num_pos (the learned position table, a square grid);
- ``adapter_config``: vit_layers (the tower layers whose outputs are joined, negative from the
  top), pooling_attention_mask, the pooling attention's sizes, hidden_act, intermediate_size
  (the projector MLP) and text_hidden_size;
- ``text_config``: the decoder's sizes, vocab_size and additional_vocab_size (embedding rows
  past the output vocabulary), qkv_bias, use_qk_norm and qk_norm_type, layer_norm_eps,
  norm_after, rope_scaling_layers, rope_theta and ``rope_parameters``;
- the top level: the ids of the image and frame tokens (image_patch_id, image_col_id,
  image_start_token_id, low_res_image_start_token_id, image_end_token_id, image_low_res_id,
  frame_start_token_id, frame_end_token_id)."""

from typing import Any

from transformers import PretrainedConfig


class Molmo2VitConfig(PretrainedConfig):
    model_type = "molmo2_vit"

    def __init__(
        self,
        hidden_size: int = 1152,
        intermediate_size: int = 4304,
        num_hidden_layers: int = 27,
        num_attention_heads: int = 16,
        num_key_value_heads: int = 16,
        head_dim: int = 72,
        hidden_act: str = "gelu_pytorch_tanh",
        layer_norm_eps: float = 1e-6,
        image_default_input_size: tuple[int, int] = (378, 378),
        image_patch_size: int = 14,
        image_num_pos: int = 729,
        **kwargs: Any,
    ) -> None:
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.image_default_input_size = list(image_default_input_size)
        self.image_patch_size = image_patch_size
        self.image_num_pos = image_num_pos
        super().__init__(**kwargs)


class Molmo2AdapterConfig(PretrainedConfig):
    model_type = "molmo2_adapter"

    def __init__(
        self,
        vit_layers: tuple[int, ...] = (-3, -9),
        pooling_attention_mask: bool = False,
        hidden_size: int = 1152,
        num_attention_heads: int = 16,
        num_key_value_heads: int = 16,
        head_dim: int = 72,
        hidden_act: str = "silu",
        intermediate_size: int = 12288,
        text_hidden_size: int = 4096,
        **kwargs: Any,
    ) -> None:
        self.vit_layers = list(vit_layers)
        self.pooling_attention_mask = pooling_attention_mask
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.text_hidden_size = text_hidden_size
        super().__init__(**kwargs)


class Molmo2TextConfig(PretrainedConfig):
    model_type = "molmo2_text"

    def __init__(
        self,
        hidden_size: int = 4096,
        num_attention_heads: int = 32,
        num_key_value_heads: int = 8,
        head_dim: int = 128,
        vocab_size: int = 151936,
        additional_vocab_size: int = 128,
        qkv_bias: bool = False,
        num_hidden_layers: int = 36,
        intermediate_size: int = 12288,
        hidden_act: str = "silu",
        max_position_embeddings: int = 36864,
        rope_theta: float = 1000000.0,
        rope_parameters: dict[str, Any] | None = None,
        use_qk_norm: bool = True,
        qk_norm_type: str = "qwen3",
        layer_norm_eps: float = 1e-6,
        norm_after: bool = False,
        rope_scaling_layers: list[int] | None = None,
        **kwargs: Any,
    ) -> None:
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.vocab_size = vocab_size
        self.additional_vocab_size = additional_vocab_size
        self.qkv_bias = qkv_bias
        self.num_hidden_layers = num_hidden_layers
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rope_parameters = rope_parameters or {"rope_type": "default", "rope_theta": rope_theta}
        self.use_qk_norm = use_qk_norm
        self.qk_norm_type = qk_norm_type
        self.layer_norm_eps = layer_norm_eps
        self.norm_after = norm_after
        self.rope_scaling_layers = rope_scaling_layers
        super().__init__(**kwargs)


def _sub(cls: type, value: Any) -> PretrainedConfig:
    if isinstance(value, PretrainedConfig):
        value = value.to_dict()
    fields = dict(value or {})
    fields.pop("model_type", None)
    return cls(**fields)


class Molmo2Config(PretrainedConfig):
    model_type = "molmo2"

    def __init__(
        self,
        vit_config: dict[str, Any] | None = None,
        adapter_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        image_start_token_id: int | None = None,
        low_res_image_start_token_id: int | None = None,
        image_end_token_id: int | None = None,
        image_low_res_id: int | None = None,
        image_patch_id: int | None = None,
        image_col_id: int | None = None,
        frame_start_token_id: int | None = None,
        frame_end_token_id: int | None = None,
        use_frame_special_tokens: bool = True,
        **kwargs: Any,
    ) -> None:
        self.vit_config = _sub(Molmo2VitConfig, vit_config)
        self.adapter_config = _sub(Molmo2AdapterConfig, adapter_config)
        self.text_config = _sub(Molmo2TextConfig, text_config)
        self.image_start_token_id = image_start_token_id
        self.low_res_image_start_token_id = low_res_image_start_token_id
        self.image_end_token_id = image_end_token_id
        self.image_low_res_id = image_low_res_id
        self.image_patch_id = image_patch_id
        self.image_col_id = image_col_id
        self.frame_start_token_id = frame_start_token_id
        self.frame_end_token_id = frame_end_token_id
        self.use_frame_special_tokens = use_frame_special_tokens
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("vit_config", "adapter_config", "text_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
