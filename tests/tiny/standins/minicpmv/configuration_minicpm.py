# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for MiniCPM-V 2.6's remote config class (``MiniCPMVConfig``, model type
"minicpmv"), written from the fields vLLM 0.32's minicpmv.py reads: the Qwen2 language model's
fields at the top level (vLLM's Qwen2ForCausalLM reads them from this config), ``version``
(2.6 picks vLLM's MiniCPMV2_6), ``query_num`` (the resampler's queries per slice),
``image_size`` (the slicing resolution), ``drop_vision_last_layer`` and ``vision_config``
(a SigLIP vision config, which vLLM's Idefics2 vision tower reads)."""

from typing import Any

from transformers import PretrainedConfig, SiglipVisionConfig


class MiniCPMVConfig(PretrainedConfig):
    model_type = "minicpmv"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        query_num: int = 64,
        image_size: int = 448,
        drop_vision_last_layer: bool = False,
        batch_vision_input: bool = True,
        slice_mode: bool = True,
        slice_config: dict[str, Any] | None = None,
        use_image_id: bool = True,
        version: float = 2.6,
        **kwargs: Any,
    ) -> None:
        vision = dict(vision_config) if isinstance(vision_config, dict) else {}
        vision.pop("model_type", None)
        self.vision_config = SiglipVisionConfig(**vision)
        self.query_num = query_num
        self.image_size = image_size
        self.drop_vision_last_layer = drop_vision_last_layer
        self.batch_vision_input = batch_vision_input
        self.slice_mode = slice_mode
        self.slice_config = dict(slice_config or {"max_slice_nums": 9, "patch_size": 14})
        self.use_image_id = use_image_id
        self.version = version
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        vision = getattr(self, "vision_config", None)  # absent while a default is built
        if isinstance(vision, PretrainedConfig):
            out["vision_config"] = vision.to_dict()
        return out
