"""Tiny checkpoints of Audio Flamingo 3 and Music Flamingo (see tests/tiny/__init__.py).

Music Flamingo runs on vLLM 0.24 (vLLM 0.32 removed it; see tests/tiny/__main__.py):
transformers' MusicFlamingoConfig and MusicFlamingoProcessor (Whisper features); its prompt is
hand-written ChatML: real prompt format. Both are config-only: vLLM initialises random
weights itself (``load_format="dummy"``).
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
from tests.tiny._common import DUMMY_ENGINE, QWEN_CHAT, finish_config

# The chat template nvidia/audio-flamingo-3-hf ships (from transformers'
# convert_audioflamingo3_to_hf.py): one <sound> per message that carries audio, then the text.
_AF3_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages if m['content'] is not none %}"
    "<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}"
    "{% set audio = namespace(found=False) %}{% set text_buf = namespace(v='') %}"
    "{% for c in m['content'] %}"
    "{% if c.get('type') == 'audio' or 'audio' in c %}{% set audio.found = True %}"
    "{% elif c.get('type') == 'text' or 'text' in c %}{% set text_buf.v = text_buf.v + c['text'] %}"
    "{% endif %}{% endfor %}"
    "{% if audio.found %}{{ '<sound>' }}{% endif %}{{ text_buf.v }}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_audioflamingo3(dest: Path) -> TinyCheckpoint:
    """Audio Flamingo 3 (``AudioFlamingo3ForConditionalGeneration``) with the chat template and
    processor the Hub checkpoint ships; config only."""
    tf = transformers_module()

    tok = build_tokenizer(
        dest,
        [*QWEN_CHAT, "<sound>"],
        chat_template=_AF3_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, [*QWEN_CHAT, "<sound>"])
    config = tf.AudioFlamingo3Config(
        audio_config={
            "hidden_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 256,
            "num_mel_bins": 128,
        },
        text_config={
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
        },
        audio_token_id=ids["<sound>"],
    )
    save_config(config, dest, "AudioFlamingo3ForConditionalGeneration")
    # Trap: vLLM 0.32 takes one audio per AudioFlamingo3 prompt (get_supported_mm_limits is
    # {"audio": 1}); vLLM's example's --num-audios 2 fails with "At most 1 audio(s) may be
    # provided".
    # The real checkpoint's feature extractor returns the attention mask, from which vLLM
    # counts the audio tokens of each window.
    tf.AudioFlamingo3Processor(
        tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True),
        tok,
        chat_template=_AF3_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 1024})


# ---------------------------------------------------------------------------------------------
# Music Flamingo (AudioFlamingo3 layout + rotary time embedding; vLLM 0.24)

_SOUND = ("<sound>", "<|sound_bos|>", "<|sound_eos|>")


def build_musicflamingo(dest: Path) -> TinyCheckpoint:
    """Music Flamingo (``MusicFlamingoForConditionalGeneration``). The time rotary embedding
    reads head_dim (the audio width), rope_parameters and max_position_embeddings from the top
    config."""
    tf = transformers_module()
    tok = build_tokenizer(
        dest, [*QWEN_CHAT, *_SOUND], eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = token_ids(tok, [*QWEN_CHAT, *_SOUND])
    audio_width = 128
    config = tf.MusicFlamingoConfig(
        # model_type is required here (transformers 5.8.1 indexes it); the real checkpoint's
        # encoder is AudioFlamingo3's.
        audio_config={
            "model_type": "audioflamingo3_encoder",
            "hidden_size": audio_width,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 256,
            "num_mel_bins": 128,
        },
        text_config={
            **TINY_TEXT,
            "model_type": "qwen2",
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
        },
        audio_token_id=ids["<sound>"],
        audio_bos_token_id=ids["<|sound_bos|>"],
        audio_eos_token_id=ids["<|sound_eos|>"],
    )
    config.head_dim = audio_width
    finish_config(config, dest, "MusicFlamingoForConditionalGeneration")
    tf.MusicFlamingoProcessor(
        tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True), tok
    ).save_pretrained(str(dest))
    # Trap: vLLM 0.24 takes one audio per Music Flamingo prompt (get_supported_mm_limits is
    # {"audio": 1}: "At most 1 audio(s) may be provided in one prompt").
    return TinyCheckpoint(dest, {**DUMMY_ENGINE, "enforce_eager": True})


PROOFS: dict[tuple[str, str], Proof] = {
    ("audio", "audioflamingo3"): Proof(build_audioflamingo3),
    ("audio", "musicflamingo"): Proof(build_musicflamingo, env="0.24"),
}
