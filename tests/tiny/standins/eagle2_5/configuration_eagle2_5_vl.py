# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Eagle 2.5's remote config class (model type "eagle_2_5_vl"), written from the
fields vLLM 0.32's eagle2_5_vl.py and the InternVL processing it builds on read: a SigLIP
vision config, a text config, and the tiling and pixel-shuffle settings (force_image_size,
min/max_dynamic_patch, dynamic_image_size, use_thumbnail, downsample_ratio, select_layer).
Both sub-configs become transformers config classes (siglip_vision_model, qwen2...)."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig


def _sub_config(fields: dict[str, Any] | None, default_type: str) -> PretrainedConfig:
    fields = dict(fields or {})
    model_type = fields.pop("model_type", default_type)
    return AutoConfig.for_model(model_type, **fields)


class Eagle2_5_VLConfig(PretrainedConfig):
    model_type = "eagle_2_5_vl"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        select_layer: int = -1,
        force_image_size: int | None = None,
        downsample_ratio: float = 0.5,
        dynamic_image_size: bool = True,
        use_thumbnail: bool = True,
        min_dynamic_patch: int = 1,
        max_dynamic_patch: int = 12,
        image_token_index: int | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(vision_config, PretrainedConfig):
            vision_config = vision_config.to_dict()
        if isinstance(text_config, PretrainedConfig):
            text_config = text_config.to_dict()
        self.vision_config = _sub_config(vision_config, "siglip_vision_model")
        self.text_config = _sub_config(text_config, "qwen2")
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        self.image_token_index = image_token_index
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("vision_config", "text_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
