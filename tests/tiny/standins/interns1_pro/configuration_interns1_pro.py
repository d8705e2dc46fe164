# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Intern-S1-Pro's remote config classes, written from what vLLM 0.32's
interns1_pro.py (and the Qwen3-VL vision tower and processor it builds on) reads: a Qwen3-MoE
style text config whose ``rope_scaling`` carries the Fourier position encoding fields
(``fope_init_factor``, ``fope_sep_head``, ``num_inv_freq``) and grouped routing
(``router_n_groups``), a Qwen3-VL style vision config without DeepStack, and the media token
ids at the top level."""

from typing import ClassVar

from transformers import PretrainedConfig


class InternS1ProVisionConfig(PretrainedConfig):
    model_type = "interns1_pro_vision"
    base_config_key = "vision_config"

    def __init__(
        self,
        depth=24,
        hidden_size=1024,
        hidden_act="gelu_pytorch_tanh",
        intermediate_size=4096,
        num_heads=16,
        in_channels=3,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=4096,
        num_position_embeddings=2304,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.depth = depth
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.num_heads = num_heads
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.spatial_merge_size = spatial_merge_size
        self.temporal_patch_size = temporal_patch_size
        self.out_hidden_size = out_hidden_size
        self.num_position_embeddings = num_position_embeddings
        self.initializer_range = initializer_range


class InternS1ProTextConfig(PretrainedConfig):
    model_type = "interns1_pro_text"
    base_config_key = "text_config"

    def __init__(
        self,
        vocab_size=155008,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=94,
        num_attention_heads=64,
        num_key_value_heads=4,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=262144,
        rms_norm_eps=1e-6,
        attention_bias=False,
        attention_dropout=0.0,
        rope_theta=5000000.0,
        rope_scaling=None,
        decoder_sparse_step=1,
        moe_intermediate_size=1536,
        num_experts=512,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        router_n_groups=8,
        mlp_only_layers=None,
        tie_word_embeddings=False,
        **kwargs,
    ):
        # transformers 5 reads ``rope_scaling`` as ``rope_parameters``: one dict holding the
        # theta, the rope type and the Fourier fields, which vLLM reads under either name.
        rope = dict(rope_scaling or kwargs.pop("rope_parameters", None) or {})
        rope.setdefault("rope_type", "default")
        rope.setdefault("rope_theta", rope_theta)
        self.rope_parameters = rope
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.rope_theta = rope_theta
        self.decoder_sparse_step = decoder_sparse_step
        self.moe_intermediate_size = moe_intermediate_size
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.norm_topk_prob = norm_topk_prob
        self.router_n_groups = router_n_groups
        self.mlp_only_layers = [] if mlp_only_layers is None else mlp_only_layers
        self.tie_word_embeddings = tie_word_embeddings
        super().__init__(**kwargs)


class InternS1ProConfig(PretrainedConfig):
    model_type = "interns1_pro"
    sub_configs: ClassVar[dict[str, type]] = {
        "vision_config": InternS1ProVisionConfig,
        "text_config": InternS1ProTextConfig,
    }

    def __init__(
        self,
        text_config=None,
        vision_config=None,
        image_token_id=151655,
        video_token_id=151656,
        vision_start_token_id=151652,
        vision_end_token_id=151653,
        tie_word_embeddings=False,
        **kwargs,
    ):
        if isinstance(vision_config, dict) or vision_config is None:
            vision_config = InternS1ProVisionConfig(**(vision_config or {}))
        if isinstance(text_config, dict) or text_config is None:
            text_config = InternS1ProTextConfig(**(text_config or {}))
        self.vision_config = vision_config
        self.text_config = text_config
        self.image_token_id = image_token_id
        self.video_token_id = video_token_id
        self.vision_start_token_id = vision_start_token_id
        self.vision_end_token_id = vision_end_token_id
        self.tie_word_embeddings = tie_word_embeddings
        super().__init__(**kwargs)

    def get_text_config(self, *args, **kwargs):
        return self.text_config
