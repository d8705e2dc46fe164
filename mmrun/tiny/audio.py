"""Tiny random-weight checkpoints of the audio seed models (see :mod:`mmrun.tiny`).

Each builder writes the seed model's real architecture with small sizes: the real config
class, a BPE tokenizer trained locally carrying the model's real special tokens and chat
template, the real feature extractor / processor class, and random weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    save_random_weights,
    token_ids,
)

# Qwen-style chat tokens shared by several models (Qwen2-Audio, Qwen2.5-Omni, AudioFlamingo3).
_QWEN_CHAT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# A tiny Whisper-style audio encoder: d_model / heads = 64 (the CPU attention kernels reject
# head_dim 16/32), one layer. Encoders that read 3000 mel frames must keep
# max_source_positions = 1500 (the conv stem halves 3000 frames).
_TINY_WHISPER_ENCODER: dict[str, Any] = {
    "d_model": 128,
    "encoder_layers": 1,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 256,
    "max_source_positions": 1500,
}


def _whisper(dest: Path) -> TinyCheckpoint:
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    # Whisper's special tokens, in the real order (ids differ: the real vocab starts at 50257).
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{code}|>" for code in LANGUAGES),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    tok = build_tokenizer(
        dest,
        specials,
        tokenizer_class=WhisperTokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>"])
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=padded_vocab_size(tok),
        num_mel_bins=80,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_ffn_dim=256,
        max_target_positions=448,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=None,
        suppress_tokens=None,
        **_TINY_WHISPER_ENCODER,
    )
    save_random_weights(WhisperForConditionalGeneration, config, dest)
    WhisperProcessor(WhisperFeatureExtractor(feature_size=80), tok).save_pretrained(str(dest))
    # Trap: Whisper's encoder item is always 1500 tokens and vLLM's CPU run does not chunk
    # multimodal input, so max_num_batched_tokens must be >= 1500 (the seed's max_model_len=448
    # alone gives "max_tokens_per_mm_item (1500) is larger than max_num_batched_tokens").
    return TinyCheckpoint(dest, {"max_model_len": 448, "max_num_batched_tokens": 2048})


def _qwen2_audio(dest: Path) -> TinyCheckpoint:
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    audio = ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
    # The real chat template of Qwen2-Audio-7B-Instruct ("Audio N: <|audio_bos|>...").
    template = Qwen2AudioProcessor.default_chat_template.fget(None)  # type: ignore[attr-defined]
    tok = build_tokenizer(
        dest,
        [*_QWEN_CHAT, *audio],
        chat_template=template,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *audio])
    config = Qwen2AudioConfig(
        audio_config={**_TINY_WHISPER_ENCODER, "num_mel_bins": 128},
        text_config={
            "model_type": "qwen2",
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
        },
        audio_token_index=ids["<|AUDIO|>"],
    )
    save_random_weights(Qwen2AudioForConditionalGeneration, config, dest)
    Qwen2AudioProcessor(
        WhisperFeatureExtractor(feature_size=128), tok, chat_template=template
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {"max_model_len": 1024})


BUILDERS: dict[str, Builder] = {
    "whisper": _whisper,
    "qwen2_audio": _qwen2_audio,
}

UNPROVEN: dict[str, str] = {}
