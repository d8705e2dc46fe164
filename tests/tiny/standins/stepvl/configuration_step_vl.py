# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Step3-VL's remote config classes, written from the fields vLLM 0.32's
step_vl.py (StepVLForConditionalGeneration and its PerceptionEncoder tower) reads:

- the vision config: width, layers, heads, patch_size, image_size, output_dim, mlp_ratio,
  ls_init_value, hidden_act, use_abs_posemb, use_cls_token, use_rope2d (vLLM requires it),
  use_ln_pre, use_ln_post; and enable_patch, which vLLM's Step3VLImageProcessor takes from it
  (the loader turns it off through ``hf_overrides``, so it is a config class of its own: vLLM
  updates a nested config's attributes);
- the top-level config: vision_config, text_config (a transformers config class, here
  "qwen3"), projector_bias (the vision projector's bias), image_token_id and
  understand_projector_stride.

The model type is this stand-in's own ("step_vl"): "step3_vl" is vLLM's Step3 config, which
vLLM would load in place of this class."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig


class StepVLVisionConfig(PretrainedConfig):
    model_type = "step_vl_vision"

    def __init__(
        self,
        width: int = 1536,
        layers: int = 47,
        heads: int = 16,
        patch_size: int = 14,
        image_size: int = 728,
        output_dim: int | None = None,
        mlp_ratio: float = 4.0,
        ls_init_value: float | None = None,
        hidden_act: str = "gelu",
        use_abs_posemb: bool = True,
        use_cls_token: bool = False,
        use_rope2d: bool = True,
        use_ln_pre: bool = True,
        use_ln_post: bool = False,
        enable_patch: bool = True,
        **kwargs: Any,
    ) -> None:
        self.width = width
        self.layers = layers
        self.heads = heads
        self.patch_size = patch_size
        self.image_size = image_size
        self.output_dim = output_dim
        self.mlp_ratio = mlp_ratio
        self.ls_init_value = ls_init_value
        self.hidden_act = hidden_act
        self.use_abs_posemb = use_abs_posemb
        self.use_cls_token = use_cls_token
        self.use_rope2d = use_rope2d
        self.use_ln_pre = use_ln_pre
        self.use_ln_post = use_ln_post
        self.enable_patch = enable_patch
        super().__init__(**kwargs)


class StepVLConfig(PretrainedConfig):
    model_type = "step_vl"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        projector_bias: bool = False,
        image_token_id: int | None = None,
        understand_projector_stride: int = 2,
        **kwargs: Any,
    ) -> None:
        if isinstance(vision_config, PretrainedConfig):
            vision_config = vision_config.to_dict()
        if isinstance(text_config, PretrainedConfig):
            text_config = text_config.to_dict()
        vision = dict(vision_config or {})
        vision.pop("model_type", None)
        self.vision_config = StepVLVisionConfig(**vision)
        text = dict(text_config or {})
        self.text_config = AutoConfig.for_model(text.pop("model_type", "qwen3"), **text)
        self.projector_bias = projector_bias
        self.image_token_id = image_token_id
        self.understand_projector_stride = understand_projector_stride
        self.hidden_size = self.text_config.hidden_size
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("vision_config", "text_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
