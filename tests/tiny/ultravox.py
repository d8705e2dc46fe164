"""Tiny checkpoint of Ultravox (see tests/tiny/__init__.py), whose config and processor
classes are remote code: STAND-INS (tests/tiny/standins/ultravox/) written by this project from
what vLLM 0.32 reads and calls, copied into the folder and named in ``auto_map`` as the Hub
repository does, loaded with ``--trust-remote-code``. It proves vLLM's processor path,
placeholder expansion and model, not the original classes.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, copy_standins, write_json

# STAND-IN chat template: Llama 3's turns without its system preamble (the checkpoint's own
# template, in its tokenizer files, is not public outside the Hub).
_LLAMA3_STANDIN = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

_LLAMA3_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|audio|>",
)


def build_ultravox(dest: Path) -> TinyCheckpoint:
    """Ultravox v0.5 (``UltravoxModel``: a Whisper encoder, stacked frames projected into a
    Llama text model) with STAND-IN UltravoxConfig and UltravoxProcessor classes
    (tests/tiny/standins/). The audio config names the folder of the Whisper feature
    extractor (the real checkpoint names openai/whisper-large-v3-turbo); vLLM reads the
    config with its own UltravoxConfig, transformers with the stand-in. The tokenizer is
    trained locally with Llama 3's special tokens and ``<|audio|>`` (the real tokenizer's
    added token, at ``audio_token_index``); the chat template is a STAND-IN."""
    from mmrun.tiny.whisper import TINY_WHISPER_ENCODER

    tf = transformers_module()
    model = "ultravox"
    copy_standins(model, dest, "ultravox_config.py", "ultravox_processing.py")
    # The feature extractor alone in its folder: AutoProcessor then loads a feature extractor
    # (a WhisperProcessor beside a Whisper config.json), the only ``audio_processor`` that
    # transformers 5 accepts. The processor finds the folder by the audio config's name.
    features = dest / "whisper"
    # 5-second chunks: vLLM profiles Ultravox with 16 chunks' worth of audio.
    tf.WhisperFeatureExtractor(feature_size=80, chunk_length=5).save_pretrained(str(features))
    tok = build_tokenizer(
        dest,
        _LLAMA3_SPECIALS,
        chat_template=_LLAMA3_STANDIN,
        prepend="<|begin_of_text|>",
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
    )
    ids = token_ids(tok, _LLAMA3_SPECIALS)
    text = {
        **TINY_TEXT,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": padded_vocab_size(tok),
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": ids["<|eot_id|>"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
    }
    config = {
        "architectures": ["UltravoxModel"],
        "auto_map": {
            "AutoConfig": "ultravox_config.UltravoxConfig",
            "AutoProcessor": "ultravox_processing.UltravoxProcessor",
        },
        "model_type": "ultravox",
        "audio_config": {
            "model_type": "whisper",
            "_name_or_path": str(features),
            "num_mel_bins": 80,
            **TINY_WHISPER_ENCODER,
        },
        "text_config": text,
        "audio_token_index": ids["<|audio|>"],
        "hidden_size": 4 * TINY_WHISPER_ENCODER["d_model"],
        "stack_factor": 8,
        "projector_act": "swiglu",
        "projector_ln_mid": True,
        "norm_init": 0.4,
        "vocab_size": text["vocab_size"],
    }
    write_json(dest / "config.json", config)
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


PROOFS: dict[tuple[str, str], Proof] = {
    ("audio", "ultravox"): Proof(
        build_ultravox, standin="config and processor classes, chat template", real_prompt=False
    ),
}
