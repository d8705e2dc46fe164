# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kimi-Audio's remote config class (model_type "moonshot_kimia"), written from
what vLLM 0.32's kimi_audio.py reads: the top config is used as the Qwen2 decoder's config
(``with_hf_config(config, architectures=["Qwen2ForCausalLM"])``), plus
``kimia_adaptor_input_dim`` (4 x the Whisper encoder width: the adaptor stacks 4 frames)."""

from typing import Any

from transformers import Qwen2Config


class MoonshotKimiaConfig(Qwen2Config):
    model_type = "moonshot_kimia"

    def __init__(self, kimia_adaptor_input_dim: int = 5120, **kwargs: Any) -> None:
        self.kimia_adaptor_input_dim = kimia_adaptor_input_dim
        super().__init__(**kwargs)
