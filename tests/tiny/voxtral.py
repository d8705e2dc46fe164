"""Tiny checkpoint of Voxtral (see tests/tiny/__init__.py), in vLLM's Mistral format
(params.json + tekken.json). Weights are left to vLLM (``load_format="dummy"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import DUMMY_WEIGHTS, TINY_TEXT
from tests.tiny import Proof

# Tekken's pre-tokenisation pattern (tiktoken pat_str of Mistral's tekken.json files).
_TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Voxtral's audio front end (tekken.json "audio" and params.json "audio_encoding_args").
_VOXTRAL_AUDIO: dict[str, Any] = {
    "sampling_rate": 16000,
    "frame_rate": 12.5,
    "num_mel_bins": 128,
    "hop_length": 160,
    "window_size": 400,
    "chunk_length_s": 30.0,
}


def build_voxtral(dest: Path) -> TinyCheckpoint:
    """Voxtral in vLLM's Mistral format: params.json + tekken.json (no HF config)."""
    import base64

    from mistral_common.tokens.tokenizers.base import SpecialTokens
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    # The control tokens of tekken v7+ files, in Mistral's order, then the audio ones;
    # the rest of the special range is filled with <SPECIAL_i> as in the real file.
    specials = [t["token_str"] for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    specials += [
        SpecialTokens.audio.value,
        SpecialTokens.begin_audio.value,
        SpecialTokens.args.value,
        SpecialTokens.call_id.value,
        SpecialTokens.transcribe.value,
    ]
    num_special = 64
    specials += [f"<SPECIAL_{i}>" for i in range(len(specials), num_special)]
    # The byte-level vocabulary only: 256 one-byte tokens (tiktoken needs no merges).
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ]
    n_words = num_special + len(vocab)
    audio = dict(_VOXTRAL_AUDIO)
    tekken = {
        "config": {
            "pattern": _TEKKEN_PATTERN,
            "num_vocab_tokens": len(vocab),
            "default_vocab_size": n_words,
            "default_num_special_tokens": num_special,
            "version": "v11",
        },
        "vocab": vocab,
        "special_tokens": [
            {"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(specials)
        ],
        "audio": {
            "sampling_rate": audio.pop("sampling_rate"),
            "frame_rate": audio.pop("frame_rate"),
            "chunk_length_s": audio.pop("chunk_length_s"),
            "audio_encoding_config": audio,
        },
    }
    params = {
        "dim": TINY_TEXT["hidden_size"],
        "n_layers": 1,
        "head_dim": 64,
        "hidden_dim": TINY_TEXT["intermediate_size"],
        "n_heads": 2,
        "n_kv_heads": 1,
        "rope_theta": 100000000.0,
        "norm_eps": 1e-05,
        "vocab_size": ((n_words + 63) // 64) * 64,
        "max_position_embeddings": 4096,
        "multimodal": {
            "whisper_model_args": {
                "encoder_args": {
                    "audio_encoding_args": dict(_VOXTRAL_AUDIO),
                    "dim": 128,
                    "n_layers": 1,
                    "head_dim": 64,
                    "hidden_dim": 256,
                    "n_heads": 2,
                    "vocab_size": 51866,
                    "max_source_positions": 1500,
                },
                "downsample_args": {"downsample_factor": 4},
            }
        },
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tekken.json").write_text(json.dumps(tekken), encoding="utf-8")
    (dest / "params.json").write_text(json.dumps(params, indent=2), encoding="utf-8")
    Tekkenizer.from_file(dest / "tekken.json")  # fail here, not in the engine, if malformed
    return TinyCheckpoint(
        dest,
        {
            **DUMMY_WEIGHTS,
            "config_format": "mistral",
            "tokenizer_mode": "mistral",
            # vLLM sizes Voxtral's dummy audio from max_model_len (80 ms per token).
            "max_model_len": 1024,
        },
    )


PROOFS: dict[tuple[str, str], Proof] = {("audio", "voxtral"): Proof(build_voxtral)}
