# Remote code for a checkpoint, run by whatever transformers loads it (4.57 under vLLM 0.23):
# module-level heavy imports as remote code has them, typed against no one transformers version.
# mypy: ignore-errors
"""STAND-IN for Qwen-VL-Chat's remote ``QWenConfig`` (model_type "qwen"), written from the
fields vLLM 0.23's qwen.py / qwen_vl.py read: the decoder sizes, ``layer_norm_epsilon``,
``rotary_emb_base`` (vLLM maps it to rope_theta), ``kv_channels`` and the ``visual`` dict of
VisionTransformer arguments (image_size, patch_size, width, layers, heads, mlp_ratio,
n_queries, output_dim, image_start_id)."""

from typing import Any

from transformers import PretrainedConfig


class QWenConfig(PretrainedConfig):
    model_type = "qwen"

    def __init__(
        self,
        vocab_size: int = 151936,
        hidden_size: int = 4096,
        num_hidden_layers: int = 32,
        num_attention_heads: int = 32,
        intermediate_size: int = 22016,
        layer_norm_epsilon: float = 1e-6,
        max_position_embeddings: int = 8192,
        rotary_emb_base: float = 10000.0,
        kv_channels: int = 128,
        visual: dict[str, Any] | None = None,
        tie_word_embeddings: bool = False,
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.layer_norm_epsilon = layer_norm_epsilon
        self.max_position_embeddings = max_position_embeddings
        self.rotary_emb_base = rotary_emb_base
        self.kv_channels = kv_channels
        self.visual = dict(visual or {})
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
