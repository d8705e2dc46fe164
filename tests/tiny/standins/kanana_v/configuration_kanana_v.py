# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kanana-V's remote config class (KananaVConfig), written from the fields vLLM
0.32's kanana_v.py reads:

- ``vision_config``: a transformers Qwen2-VL vision config (vLLM builds its Qwen2-VL vision
  transformer from ``patch_size``, ``temporal_patch_size``, ``spatial_merge_size``,
  ``in_channels``, ``embed_dim``, ``depth``, ``num_heads``, ``mlp_ratio``, ``hidden_size``
  and drops its patch merger);
- ``projector_config`` (KananaVProjectorConfig below): the C-Abstractor's ``merge_size``,
  ``pos_emb`` and ``pos_emb_size`` (a square grid of learnt positions resampled to each
  image's grid), ``encoder_hidden_size`` (the vision width), ``hidden_size``,
  ``output_hidden_size`` (the text width), ``depth`` (RegNet blocks per stage), ``mlp_depth``
  and ``feature_layer_index`` (which vision hidden state it reads);
- ``text_config``: a transformers Llama config, built by vLLM as ``LlamaForCausalLM``; the
  image token's id is its ``eos_token_id`` plus one."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig


class KananaVProjectorConfig(PretrainedConfig):
    model_type = "kanana_v_projector"

    def __init__(
        self,
        merge_size: int = 2,
        pos_emb: bool = True,
        pos_emb_size: int = 576,
        encoder_hidden_size: int = 1280,
        hidden_size: int = 1024,
        output_hidden_size: int = 2048,
        depth: int = 3,
        mlp_depth: int = 2,
        feature_layer_index: int | list[int] = -1,
        **kwargs: Any,
    ) -> None:
        self.merge_size = merge_size
        self.pos_emb = pos_emb
        self.pos_emb_size = pos_emb_size
        self.encoder_hidden_size = encoder_hidden_size
        self.hidden_size = hidden_size
        self.output_hidden_size = output_hidden_size
        self.depth = depth
        self.mlp_depth = mlp_depth
        self.feature_layer_index = feature_layer_index
        super().__init__(**kwargs)


class KananaVConfig(PretrainedConfig):
    model_type = "kanana-1.5-v"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        projector_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        parts = {}
        for name, value in (
            ("vision_config", vision_config),
            ("projector_config", projector_config),
            ("text_config", text_config),
        ):
            parts[name] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        vision = {k: v for k, v in (parts["vision_config"] or {}).items() if k != "model_type"}
        self.vision_config = Qwen2VLVisionConfig(**vision)
        projector = dict(parts["projector_config"] or {})
        projector.pop("model_type", None)
        self.projector_config = KananaVProjectorConfig(**projector)
        text = dict(parts["text_config"] or {})
        self.text_config = AutoConfig.for_model(text.pop("model_type", "llama"), **text)
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("vision_config", "projector_config", "text_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
