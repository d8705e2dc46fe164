"""A tiny Whisper checkpoint (``mmrun selftest``, and the tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    DUMMY_WEIGHTS,
    build_tokenizer,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)

# A tiny Whisper-style audio encoder: d_model / heads = 64 (the CPU attention kernels reject
# head_dim 16/32), one layer. Encoders that read 3000 mel frames must keep
# max_source_positions = 1500 (the conv stem halves 3000 frames).
TINY_WHISPER_ENCODER: dict[str, Any] = {
    "d_model": 128,
    "encoder_layers": 1,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 256,
    "max_source_positions": 1500,
}


def build_whisper(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()
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
        tokenizer_class=tf.WhisperTokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>"])
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = tf.WhisperConfig(
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
        **TINY_WHISPER_ENCODER,
    )
    save_config(config, dest, "WhisperForConditionalGeneration")
    tf.WhisperProcessor(tf.WhisperFeatureExtractor(feature_size=80), tok).save_pretrained(str(dest))
    # Trap: Whisper's encoder item is always 1500 tokens and vLLM's CPU run does not chunk
    # multimodal input, so max_num_batched_tokens must be >= 1500 (max_model_len=448, as in
    # vLLM's example, alone gives "max_tokens_per_mm_item (1500) is larger than max_num_batched_tokens").
    return TinyCheckpoint(
        dest, {**DUMMY_WEIGHTS, "max_model_len": 448, "max_num_batched_tokens": 2048}
    )
