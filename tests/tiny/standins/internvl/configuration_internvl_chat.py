# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for the remote config classes of the InternVL-style chat checkpoints
(InternVL2 "internvl_chat", H2OVL-Mississippi "h2ovl_chat", NVLM-D "NVLM_D", Skywork-R1V
"skywork_chat"), written from the fields vLLM 0.32's internvl.py / h2ovl.py / nvlm_d.py /
skyworkr1v.py / intern_vit.py read. The vision tower's
fields stay a plain config (vLLM's InternViT reads them as attributes); the language model's
become its transformers config class when transformers knows the type (qwen2, llama...)."""

from typing import Any

from transformers import AutoConfig, PretrainedConfig


def _text_config(llm_config: dict[str, Any]) -> PretrainedConfig:
    fields = dict(llm_config)
    model_type = fields.pop("model_type", None)
    try:
        return AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError):  # a type only remote code knows (e.g. internlm2)
        return PretrainedConfig(model_type=model_type, **fields)


class InternVLChatConfig(PretrainedConfig):
    model_type = "internvl_chat"

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        llm_config: dict[str, Any] | None = None,
        select_layer: int = -1,
        force_image_size: int | None = None,
        downsample_ratio: float = 0.5,
        template: str | None = None,
        dynamic_image_size: bool = False,
        use_thumbnail: bool = False,
        ps_version: str = "v1",
        min_dynamic_patch: int = 1,
        max_dynamic_patch: int = 6,
        **kwargs: Any,
    ) -> None:
        vision = vision_config if isinstance(vision_config, dict) else {}
        llm = llm_config if isinstance(llm_config, dict) else {"model_type": "qwen2"}
        self.vision_config = PretrainedConfig(**vision)
        self.llm_config = self.text_config = _text_config(llm)
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.ps_version = ps_version
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        # Last: transformers' own __init__ may already look at text_config.
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("text_config", None)
        for key in ("vision_config", "llm_config"):
            value = getattr(self, key, None)  # absent while a default instance is built
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out


class H2OVLChatConfig(InternVLChatConfig):
    """H2OVL adds multi-scale adaptive cropping (``use_msac``), read by vLLM's H2OVL processor."""

    model_type = "h2ovl_chat"

    def __init__(self, use_msac: bool = False, **kwargs: Any) -> None:
        self.use_msac = use_msac
        super().__init__(**kwargs)


class NVLM_D_Config(InternVLChatConfig):
    model_type = "NVLM_D"

    # Trap: transformers 5 turns a config subclass without an __init__ of its own into a
    # dataclass whose generated __init__ skips InternVLChatConfig's (no text_config then).
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)


class SkyworkR1VChatConfig(InternVLChatConfig):
    """Skywork-R1V: InternVL's fields (vLLM's skyworkr1v.py reads the same ones)."""

    model_type = "skywork_chat"

    def __init__(self, **kwargs: Any) -> None:  # see NVLM_D_Config
        super().__init__(**kwargs)
