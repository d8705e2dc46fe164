# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Ultravox's remote config class (model_type "ultravox"), written from the fields
vLLM 0.32's ultravox.py reads (vLLM parses config.json with its own UltravoxConfig; this class
is what transformers' AutoConfig, and so AutoProcessor, loads): the Whisper ``audio_config``,
the wrapped ``text_config``, ``audio_token_index``, ``stack_factor`` and the projector
settings. ``audio_config._name_or_path`` names where the audio processor is."""

from typing import Any

from transformers import CONFIG_MAPPING, PretrainedConfig


class UltravoxConfig(PretrainedConfig):
    model_type = "ultravox"

    def __init__(
        self,
        audio_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        audio_token_index: int = 32000,
        hidden_size: int = 4096,
        stack_factor: int = 8,
        norm_init: float = 0.4,
        projector_act: str = "swiglu",
        projector_ln_mid: bool = True,
        **kwargs: Any,
    ) -> None:
        audio = dict(audio_config or {})
        text = dict(text_config or {})
        self.audio_config = CONFIG_MAPPING[audio.pop("model_type", "whisper")](**audio)
        self.text_config = CONFIG_MAPPING[text.pop("model_type", "llama")](**text)
        self.audio_token_index = audio_token_index
        self.hidden_size = hidden_size
        self.stack_factor = stack_factor
        self.norm_init = norm_init
        self.projector_act = projector_act
        self.projector_ln_mid = projector_ln_mid
        super().__init__(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("audio_config", "text_config"):
            value = getattr(self, key, None)
            out[key] = value.to_dict() if isinstance(value, PretrainedConfig) else value
        return out
