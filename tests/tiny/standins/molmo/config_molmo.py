# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo's remote config class (MolmoConfig, model type "molmo"), written from the
fields vLLM 0.32's molmo.py reads: the decoder's sizes (``hidden_size``, ``intermediate_size``
holding the fused gate and up projections, heads, layers), ``embedding_size`` (vLLM adds 128
rows to it), ``qkv_bias``, ``attention_layer_norm``, ``layer_norm_type`` ("rms"),
``layer_norm_eps``, ``norm_after``, ``weight_tying`` and the rope settings. vLLM builds the
vision tower from its own fixed settings (CLIP ViT-L/14 at 336 pixels), not from this config."""

from typing import Any

from transformers import PretrainedConfig


class MolmoConfig(PretrainedConfig):
    model_type = "molmo"

    def __init__(
        self,
        vocab_size: int = 50304,
        embedding_size: int | None = None,
        hidden_size: int = 4096,
        intermediate_size: int = 11008,
        num_hidden_layers: int = 32,
        num_attention_heads: int = 32,
        num_key_value_heads: int | None = None,
        max_position_embeddings: int = 2048,
        initializer_range: float = 0.02,
        use_cache: bool = True,
        layer_norm_eps: float = 1e-5,
        rope_theta: float = 10000.0,
        clip_qkv: float | None = None,
        qkv_bias: bool = False,
        weight_tying: bool = False,
        use_position_ids: bool = True,
        tie_word_embeddings: bool = True,
        attention_layer_norm: bool = False,
        norm_after: bool = False,
        layer_norm_type: str = "rms",
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.use_cache = use_cache
        self.layer_norm_eps = layer_norm_eps
        self.rope_theta = rope_theta
        self.clip_qkv = clip_qkv
        self.qkv_bias = qkv_bias
        self.weight_tying = weight_tying
        self.use_position_ids = use_position_ids
        self.attention_layer_norm = attention_layer_norm
        self.norm_after = norm_after
        self.layer_norm_type = layer_norm_type
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
