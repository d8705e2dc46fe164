"""Tiny random-weight checkpoints of the audio seed models (see tests/tiny/__init__.py).

Each builder writes the seed model's real architecture with small sizes: the config class the
engine parses (transformers', or the one vLLM ships where the checkpoints' model_type is
unknown to transformers: Qwen3-ASR, FunAudioChat), a BPE tokenizer trained locally carrying
the model's real special tokens and chat template, and the real feature extractor / processor
class, all saved with ``save_pretrained``. Voxtral is written in vLLM's Mistral format
(params.json + tekken.json). Weights are left to vLLM (``load_format="dummy"``, see _ENGINE).

Verified with vLLM 0.32 (CPU) and transformers 5.19 by tests/e2e/test_tiny_audio_engine.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)
from mmrun.tiny.whisper import TINY_WHISPER_ENCODER as _TINY_WHISPER_ENCODER
from mmrun.tiny.whisper import build_whisper

# Qwen-style chat tokens shared by several models (Qwen2-Audio, Qwen2.5-Omni, AudioFlamingo3).
_QWEN_CHAT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


_ENGINE = DUMMY_WEIGHTS


def _vllm_config(name: str) -> Any:
    """A config module that vLLM ships (``vllm.transformers_utils.configs.<name>``)."""
    from importlib import import_module

    return import_module(f"vllm.transformers_utils.configs.{name}")


def _qwen2_audio(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()

    audio = ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
    # The real chat template of Qwen2-Audio-7B-Instruct ("Audio N: <|audio_bos|>...").
    template = tf.Qwen2AudioProcessor.default_chat_template.fget(None)
    tok = build_tokenizer(
        dest,
        [*_QWEN_CHAT, *audio],
        chat_template=template,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *audio])
    config = tf.Qwen2AudioConfig(
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
    save_config(config, dest, "Qwen2AudioForConditionalGeneration")
    tf.Qwen2AudioProcessor(
        tf.WhisperFeatureExtractor(feature_size=128), tok, chat_template=template
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 1024})


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


def _audioflamingo3(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()

    tok = build_tokenizer(
        dest,
        [*_QWEN_CHAT, "<sound>"],
        chat_template=_AF3_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, [*_QWEN_CHAT, "<sound>"])
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
    # {"audio": 1}); the seed's --num-audios 2 fails with "At most 1 audio(s) may be provided".
    # The real checkpoint's feature extractor returns the attention mask, from which vLLM
    # counts the audio tokens of each window.
    tf.AudioFlamingo3Processor(
        tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True),
        tok,
        chat_template=_AF3_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 1024})


# The chat template of zai-org/GLM-ASR-Nano-2512 in transformers format (from transformers'
# convert_glmasr_weights_to_hf.py).
_GLMASR_TEMPLATE = (
    "{%- macro to_text(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is iterable and content is not mapping -%}"
    "{%- for item in content -%}"
    "{%- if item is mapping and item.type == 'text' and item.text is defined -%}{{- item.text -}}"
    "{%- elif item is mapping and (item.type == 'audio' or 'audio' in item) -%}"
    "<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\n"
    "{% elif item is string -%}{{- item -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- else -%}{{- content -}}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>\n{{ to_text(m.content) | trim }}"
    "{%- elif m.role == 'user' -%}<|user|>\n{{ to_text(m.content) | trim }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>\n{{ to_text(m.content) | trim }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>\n{% endif -%}"
)

# GLM-4 family special tokens (GLM-ASR-Nano's tokenizer), audio ones included.
_GLM_SPECIALS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|pad|>",
)


def _glmasr(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()

    tok = build_tokenizer(
        dest,
        _GLM_SPECIALS,
        chat_template=_GLMASR_TEMPLATE,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _GLM_SPECIALS)
    config = tf.GlmAsrConfig(
        audio_config={
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_mel_bins": 128,
        },
        text_config={
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        },
        audio_token_id=ids["<|pad|>"],
    )
    save_config(config, dest, "GlmAsrForConditionalGeneration")
    # Trap: two audios in one prompt fail inside transformers' GlmAsrProcessor ("Got 1 text but
    # 2 audios; they must match 1:1"), although vLLM declares no limit: one audio per prompt.
    # max_audio_len: the real 655 s makes vLLM profile the encoder on 22 dummy 30 s windows
    # (~20 s more engine start on 2 cores); 60 s keeps the tiny run quick.
    tf.GlmAsrProcessor(
        tf.WhisperFeatureExtractor(feature_size=128),
        tok,
        chat_template=_GLMASR_TEMPLATE,
        max_audio_len=60,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 1024})


# Qwen2.5-Omni-7B's chat template (per-item audio / image / video placeholders).
_QWEN_OMNI_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}"
    "{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "{% set audio_count.value = audio_count.value + 1 %}"
    "{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}"
    "<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _qwen2_5_omni(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()

    # Qwen2_5OmniProcessor reads these names from the tokenizer (tokenizer.audio_token, ...).
    named: dict[str, Any] = {
        "audio_token": "<|AUDIO|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
        "image_token": "<|IMAGE|>",
        "video_token": "<|VIDEO|>",
        "vision_bos_token": "<|vision_bos|>",
        "vision_eos_token": "<|vision_eos|>",
    }
    tok = build_tokenizer(
        dest,
        _QWEN_CHAT,
        chat_template=_QWEN_OMNI_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *named.values()])
    hidden = TINY_TEXT["hidden_size"]
    thinker = {
        "audio_config": {
            "d_model": 128,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 256,
            "output_dim": hidden,
        },
        "vision_config": {
            "depth": 1,
            "hidden_size": 128,
            "num_heads": 2,
            "intermediate_size": 256,
            "out_hidden_size": hidden,
            "fullatt_block_indexes": [0],
        },
        "text_config": {
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
            # The sections sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
            "rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12]},
        },
        "audio_token_index": ids["<|AUDIO|>"],
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
    }
    # vLLM runs the thinker only; talker and token2wav keep their defaults (config only).
    config = tf.Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    save_config(config, dest, "Qwen2_5OmniModel")
    pixels = {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
    tf.Qwen2_5OmniProcessor(
        image_processor=tf.Qwen2VLImageProcessor(size=pixels),
        video_processor=tf.Qwen2VLVideoProcessor(size=pixels),
        feature_extractor=tf.WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_QWEN_OMNI_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 1024})


# Qwen3-ASR's chat template (transformers' convert_qwen3_asr_to_hf.py, which extends the
# original repo's template with assistant turns): system text, then one
# <|audio_start|><|audio_pad|><|audio_end|> per audio in a single user turn.
_QWEN3_ASR_TEMPLATE = (
    "{%- set ns = namespace(system_text='') -%}"
    "{%- for m in messages -%}{%- if m.role == 'system' -%}"
    "{%- if m.content is string -%}{%- set ns.system_text = ns.system_text + m.content -%}"
    "{%- else -%}{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns.system_text = ns.system_text + c.text -%}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{%- endif -%}{%- endfor -%}"
    "{%- set ns2 = namespace(audio_tokens='') -%}"
    "{%- for m in messages -%}{%- if m.content is not string -%}{%- for c in m.content -%}"
    "{%- if c.type == 'audio' or ('audio' in c) or ('audio_url' in c) -%}"
    "{%- set ns2.audio_tokens = ns2.audio_tokens + '<|audio_start|><|audio_pad|><|audio_end|>' -%}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}{%- endfor -%}"
    "{{- '<|im_start|>system\\n' + ns.system_text + '<|im_end|>\\n' -}}"
    "{{- '<|im_start|>user\\n' + ns2.audio_tokens + '<|im_end|>\\n' -}}"
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}"
    "{%- set ns3 = namespace(assistant_text='') -%}"
    "{%- if m.content is string -%}{%- set ns3.assistant_text = m.content -%}"
    "{%- else -%}{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns3.assistant_text = ns3.assistant_text + c.text -%}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{% generation %}{{- ns3.assistant_text + '<|im_end|>\\n' -}}{% endgeneration %}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def _qwen3_asr(dest: Path) -> TinyCheckpoint:
    tf = transformers_module()

    # vLLM registers its own Qwen3ASRConfig for model_type "qwen3_asr": the original repo's
    # layout (thinker_config with audio/text), not transformers' flattened HF layout.
    Qwen3ASRConfig = _vllm_config("qwen3_asr").Qwen3ASRConfig

    named: dict[str, Any] = {
        "audio_token": "<|audio_pad|>",
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
    }
    tok = build_tokenizer(
        dest,
        _QWEN_CHAT,
        chat_template=_QWEN3_ASR_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *named.values()])
    thinker = {
        "audio_config": {
            "d_model": 128,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 256,
            "output_dim": TINY_TEXT["hidden_size"],
            "downsample_hidden_size": 32,
            # Trap: vLLM's placeholder count assumes 100-frame chunks (n_window 50, as in the
            # real checkpoint); the config class default (100, from Qwen3-Omni) makes the
            # encoder output disagree with the placeholders ("split_with_sizes expects ...").
            "n_window": 50,
            "n_window_infer": 800,
        },
        "text_config": {
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            # Interleaved M-RoPE like the real model; sections sum to head_dim / 2 = 32.
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [12, 10, 10],
                "interleaved": True,
                "mrope_interleaved": True,
            },
        },
        "audio_token_id": ids["<|audio_pad|>"],
        "audio_start_token_id": ids["<|audio_start|>"],
    }
    config = Qwen3ASRConfig(thinker_config=thinker)
    save_config(config, dest, "Qwen3ASRForConditionalGeneration")
    # Trap: vLLM's class writes timestamp_token_id / support_languages as null, which
    # transformers 5.19's own (strict) Qwen3ASRConfig rejects, so AutoTokenizer / AutoConfig
    # on the folder fail ("Field 'timestamp_token_id' expected int, got NoneType"); the
    # original checkpoints simply omit them.
    path = dest / "config.json"
    saved = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(
        json.dumps({k: v for k, v in saved.items() if v is not None}, indent=2), encoding="utf-8"
    )
    tf.Qwen3ASRProcessor(
        feature_extractor=tf.Qwen3ASRFeatureExtractor(),
        tokenizer=tok,
        chat_template=_QWEN3_ASR_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 1024})


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


def _voxtral(dest: Path) -> TinyCheckpoint:
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
            **_ENGINE,
            "config_format": "mistral",
            "tokenizer_mode": "mistral",
            # vLLM sizes Voxtral's dummy audio from max_model_len (80 ms per token).
            "max_model_len": 1024,
        },
    )


def _funaudiochat(dest: Path) -> TinyCheckpoint:
    """FunAudioChat: a discrete speech-token encoder plus a continuous Whisper-style one."""
    tf = transformers_module()

    # The checkpoints' model_type "funaudiochat" is unknown to transformers and has no
    # auto_map; vLLM ships the config class (a "temporary shim").
    FunAudioChatConfig = _vllm_config("funaudiochat").FunAudioChatConfig

    audio = ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
    tok = build_tokenizer(
        dest, [*_QWEN_CHAT, *audio], eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *audio])
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
    return TinyCheckpoint(dest, {**_ENGINE, "max_model_len": 2048})


BUILDERS: dict[str, Builder] = {
    "whisper": build_whisper,
    "qwen2_audio": _qwen2_audio,
    "audioflamingo3": _audioflamingo3,
    "glmasr": _glmasr,
    "qwen2_5_omni": _qwen2_5_omni,
    "qwen3_asr": _qwen3_asr,
    "voxtral": _voxtral,
    "funaudiochat": _funaudiochat,
}

# Why each other audio seed row has no offline proof on vLLM 0.32 + transformers 5.19.
UNPROVEN: dict[str, str] = {
    "minicpmo": "needs remote code (MiniCPMOConfig and the checkpoint's processor)",
}
