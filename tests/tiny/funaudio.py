"""Tiny checkpoint of FunAudioChat (see tests/tiny/__init__.py): the config class vLLM
ships (the checkpoints' model_type is unknown to transformers), weights left to vLLM
(``load_format="dummy"``).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import QWEN_CHAT, vllm_config


def build_funaudiochat(dest: Path) -> TinyCheckpoint:
    """FunAudioChat: a discrete speech-token encoder plus a continuous Whisper-style one."""
    tf = transformers_module()

    # The checkpoints' model_type "funaudiochat" is unknown to transformers and has no
    # auto_map; vLLM ships the config class (a "temporary shim").
    FunAudioChatConfig = vllm_config("funaudiochat").FunAudioChatConfig

    audio = ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
    tok = build_tokenizer(
        dest, [*QWEN_CHAT, *audio], eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = token_ids(tok, [*QWEN_CHAT, *audio])
    # vLLM tokenises "<|audio_pad|>" * (25 per second) with the speech tokenizer (subfolder
    # speech_tokenizer) and embeds those ids with the discrete encoder's codebook.
    speech = build_tokenizer(
        dest / "speech_tokenizer", ["<|audio_pad|>"], pad_token="<|audio_pad|>"
    )
    config = FunAudioChatConfig(
        audio_config={
            "d_model": 128,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 256,
            "output_dim": TINY_TEXT["hidden_size"],
            "codebook_size": padded_vocab_size(speech),
            "pad_token_id": token_ids(speech, ["<|audio_pad|>"])["<|audio_pad|>"],
            "group_size": 5,
        },
        text_config={
            "model_type": "qwen3",
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
        },
        audio_token_index=ids["<|AUDIO|>"],
    )
    save_config(config, dest, "FunAudioChatForConditionalGeneration")
    tf.WhisperFeatureExtractor(feature_size=128).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 2048})


PROOFS: dict[tuple[str, str], Proof] = {("audio", "funaudiochat"): Proof(build_funaudiochat)}
