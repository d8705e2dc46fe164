"""Tiny checkpoints of Alibaba's Qwen models (see tests/tiny/__init__.py): Qwen2-VL and
Qwen2.5-VL (mmrun.tiny's, which ``mmrun selftest`` builds), Qwen2-Audio, Qwen2.5-Omni,
Qwen3-ASR, Qwen3-VL and Qwen3-VL-MoE, Qwen3.5 and Qwen3.5-MoE, and Qwen-VL-Chat (an older
vLLM's row, see tests/tiny/__main__.py).

Each writes the model's real config class with small sizes (transformers', or the one vLLM
ships where the checkpoint's model_type is unknown to transformers: Qwen3-ASR), a BPE tokenizer
trained locally carrying the model's real special tokens, and the real processor classes.

Qwen-VL-Chat (vLLM 0.23) carries STAND-IN config and tokenizer classes
(tests/tiny/standins/qwen_vl): the proof is of vLLM's path and the loader's prompt shape, not
of the original classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import _QWEN2_VL_TEMPLATE, _QWEN_SPECIALS, build_qwen2_5_vl, build_qwen2_vl
from mmrun.tiny.whisper import TINY_WHISPER_ENCODER
from tests.tiny import Proof
from tests.tiny._common import (
    DUMMY_ENGINE,
    QWEN_CHAT,
    byte_level_tiktoken,
    copy_standins,
    text_config,
    vllm_config,
)

# ---------------------------------------------------------------------------------------------
# Qwen2-Audio


def build_qwen2_audio(dest: Path) -> TinyCheckpoint:
    """Qwen2-Audio-7B-Instruct (``Qwen2AudioForConditionalGeneration``: a Whisper encoder, a
    Qwen2 text model) with its real chat template and processor; config only."""
    tf = transformers_module()

    audio = ("<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
    # The real chat template of Qwen2-Audio-7B-Instruct ("Audio N: <|audio_bos|>...").
    template = tf.Qwen2AudioProcessor.default_chat_template.fget(None)
    tok = build_tokenizer(
        dest,
        [*QWEN_CHAT, *audio],
        chat_template=template,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, [*QWEN_CHAT, *audio])
    config = tf.Qwen2AudioConfig(
        audio_config={**TINY_WHISPER_ENCODER, "num_mel_bins": 128},
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
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 1024})


# ---------------------------------------------------------------------------------------------
# Qwen2.5-Omni

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


def build_qwen2_5_omni(dest: Path) -> TinyCheckpoint:
    """Qwen2.5-Omni (``Qwen2_5OmniModel``): the thinker (audio and vision towers, a Qwen2.5 text
    model) with its real chat template and processor; config only."""
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
        QWEN_CHAT,
        chat_template=_QWEN_OMNI_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, [*QWEN_CHAT, *named.values()])
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
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 1024})


# ---------------------------------------------------------------------------------------------
# Qwen3-ASR

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


def build_qwen3_asr(dest: Path) -> TinyCheckpoint:
    """Qwen3-ASR (``Qwen3ASRForConditionalGeneration``): the config class vLLM ships, with
    transformers' Qwen3-ASR processor and chat template; config only."""
    tf = transformers_module()

    # vLLM registers its own Qwen3ASRConfig for model_type "qwen3_asr": the original repo's
    # layout (thinker_config with audio/text), not transformers' flattened HF layout.
    Qwen3ASRConfig = vllm_config("qwen3_asr").Qwen3ASRConfig

    named: dict[str, Any] = {
        "audio_token": "<|audio_pad|>",
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
    }
    tok = build_tokenizer(
        dest,
        QWEN_CHAT,
        chat_template=_QWEN3_ASR_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, [*QWEN_CHAT, *named.values()])
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
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 1024})


# ---------------------------------------------------------------------------------------------
# Qwen3-VL


def build_qwen3_vl(dest: Path) -> TinyCheckpoint:
    """Qwen3-VL (``Qwen3VLForConditionalGeneration``: 16-pixel patches, DeepStack, interleaved
    M-RoPE), with the real Qwen3-VL image and video processors.

    Stand-in chat template (for the chat method only): Qwen2-VL's, the same turns and
    placeholders; Qwen3-VL's own adds tool calls and reasoning, and is not known offline.
    """
    return _qwen3_vl(dest, moe=False)


def build_qwen3_vl_moe(dest: Path) -> TinyCheckpoint:
    """Qwen3-VL-MoE (``Qwen3VLMoeForConditionalGeneration``): Qwen3-VL with a mixture of
    experts in each text layer (4 experts, 2 per token here); the same stand-in template."""
    return _qwen3_vl(dest, moe=True)


def _qwen3_vl(dest: Path, *, moe: bool) -> TinyCheckpoint:
    tf = transformers_module()
    tokenizer, ids = _qwen3_tokenizer(dest)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 24/20/20 is for head_dim 128).
    text = text_config(
        tokenizer,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [8, 12, 12],
            "mrope_interleaved": True,
        },
    )
    vision = {**QWEN3_VISION, "deepstack_visual_indexes": [0]}
    if moe:
        # norm_topk_prob: vLLM reads it (the real config.json carries it; the class has no field).
        text |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "norm_topk_prob": True,
        }
        return _qwen3_checkpoint(
            dest, tf.Qwen3VLMoeConfig, tf.Qwen3VLMoeForConditionalGeneration, text, vision, ids,
            tokenizer, dummy_weights=True,
        )  # fmt: skip
    return _qwen3_checkpoint(
        dest, tf.Qwen3VLConfig, tf.Qwen3VLForConditionalGeneration, text, vision, ids, tokenizer
    )


def _qwen3_tokenizer(dest: Path) -> tuple[Any, dict[str, int]]:
    """The Qwen tokenizer of the Qwen3-VL-style checkpoints (Qwen3-VL, Qwen3.5) and its
    special tokens' ids, with the stand-in chat template (Qwen2-VL's)."""
    tokenizer = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    return tokenizer, token_ids(tokenizer, _QWEN_SPECIALS)


# A one-block Qwen3-VL vision tower (16-pixel patches) that feeds TINY_TEXT's hidden size.
QWEN3_VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "patch_size": 16,
    "out_hidden_size": TINY_TEXT["hidden_size"],
    "num_position_embeddings": 256,
}


def _qwen3_checkpoint(
    dest: Path,
    config_class: Any,
    model_class: Any,
    text: dict[str, Any],
    vision: dict[str, Any],
    ids: dict[str, int],
    tokenizer: Any,
    *,
    dummy_weights: bool = False,
) -> TinyCheckpoint:
    """A Qwen3-VL-style checkpoint (Qwen3-VL, Qwen3.5, and their MoE forms) with the real
    Qwen3-VL processor, image and video processors. ``dummy_weights``: the config alone, vLLM
    initialising random weights itself (for the MoE forms: transformers saves the experts
    fused, in a layout vLLM's loader does not take for these models)."""
    tf = transformers_module()
    config = config_class(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    # At most 16 merged 32x32 patches per image or frame pair: a few placeholder tokens each.
    pixels = {"shortest_edge": 4 * 32 * 32, "longest_edge": 16 * 32 * 32}
    processor = tf.Qwen3VLProcessor(
        image_processor=tf.Qwen2VLImageProcessor(size=pixels, patch_size=16),
        video_processor=tf.Qwen3VLVideoProcessor(size=pixels),
        tokenizer=tokenizer,
        chat_template=_QWEN2_VL_TEMPLATE,
    )
    if dummy_weights:
        save_config(config, dest, model_class.__name__)
        processor.save_pretrained(str(dest))
        return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})
    return finish(dest, model_class, config, processor)


# ---------------------------------------------------------------------------------------------
# Qwen3.5


def build_qwen3_5(dest: Path) -> TinyCheckpoint:
    """Qwen3.5 (``Qwen3_5ForConditionalGeneration``): a hybrid text model (a Gated DeltaNet
    linear-attention layer, then a full-attention layer, as the real one alternates them),
    the Qwen3-VL vision tower, and the real Qwen3-VL image and video processors (Qwen3.5's
    processor classes are Qwen3-VL's).

    Stand-in chat template (for the chat method only): Qwen2-VL's, the same turns and
    placeholders; Qwen3.5's own adds tool calls and reasoning, and is not known offline.
    """
    return _qwen3_5(dest, moe=False)


def build_qwen3_5_moe(dest: Path) -> TinyCheckpoint:
    """Qwen3.5-MoE (``Qwen3_5MoeForConditionalGeneration``): Qwen3.5 with a mixture of experts
    and a shared expert in each text layer (4 experts, 2 per token here); the same stand-in
    template."""
    return _qwen3_5(dest, moe=True)


def _qwen3_5(dest: Path, *, moe: bool) -> TinyCheckpoint:
    tf = transformers_module()
    tokenizer, ids = _qwen3_tokenizer(dest)
    # A quarter of each head is rotated (partial_rotary_factor 0.25, as in the real model):
    # the mrope_section halves sum to 64 * 0.25 / 2 = 8 (the real 11/11/10 is for head_dim 256).
    text = text_config(
        tokenizer,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [3, 3, 2],
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        },
    )
    if moe:
        del text["intermediate_size"]
        text |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 128,
        }
        return _qwen3_checkpoint(
            dest, tf.Qwen3_5MoeConfig, tf.Qwen3_5MoeForConditionalGeneration, text, QWEN3_VISION,
            ids, tokenizer, dummy_weights=True,
        )  # fmt: skip
    return _qwen3_checkpoint(
        dest, tf.Qwen3_5Config, tf.Qwen3_5ForConditionalGeneration, text, QWEN3_VISION, ids,
        tokenizer,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Qwen-VL-Chat (QWen decoder + ViT with a cross-attention resampler; vLLM 0.23)


def build_qwen_vl_chat(dest: Path) -> TinyCheckpoint:
    """Qwen-VL-Chat (``QwenVLForConditionalGeneration``). vLLM 0.23 ships the model, the image
    processor and the placeholder expansion (``Picture i: <img></img>`` -> ``<img>`` + pads +
    ``</img>``), but the config class and the tokenizer class are remote code: this checkpoint
    carries STAND-INS of both (tests/tiny/standins/qwen_vl), so it proves vLLM's path and the
    example's prompt shape, not the original classes. The tokenizer has no chat template, as the
    real one (the loader passes ChatML)."""
    copy_standins("qwen_vl", dest, "configuration_qwen.py", "tokenization_qwen.py")
    # Byte-level vocabulary: the 256 bytes, then the special tokens (ids 256 ... 267).
    byte_level_tiktoken(dest / "qwen.tiktoken")
    specials = (
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<ref>",
        "</ref>",
        "<box>",
        "</box>",
        "<quad>",
        "</quad>",
        "<img>",
        "</img>",
        "<imgpad>",
    )
    ids = {token: 256 + i for i, token in enumerate(specials)}
    (dest / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "QWenTokenizer",
                "auto_map": {"AutoTokenizer": ["tokenization_qwen.QWenTokenizer", None]},
                "model_max_length": 2048,
            },
            indent=2,
        )
        + "\n"
    )
    hidden = TINY_TEXT["hidden_size"]
    config = {
        "architectures": ["QWenLMHeadModel"],
        "auto_map": {"AutoConfig": "configuration_qwen.QWenConfig"},
        "model_type": "qwen",
        "vocab_size": 320,  # 268 tokens, padded
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": hidden // 64,  # head_dim 64 for the CPU attention backend
        "kv_channels": 64,
        "intermediate_size": 2 * 256,  # vLLM's QWenMLP takes intermediate_size // 2
        "layer_norm_epsilon": 1e-6,
        "max_position_embeddings": 2048,
        "rotary_emb_base": 10000,
        "tie_word_embeddings": False,
        # (56 / 14 / 2)^2 = 4 image tokens: n_queries must be that square (the resampler grid).
        "visual": {
            "image_size": 56,
            "patch_size": 14,
            "width": 64,
            "layers": 1,
            "heads": 2,
            "mlp_ratio": 2.0,
            "n_queries": 4,
            "output_dim": hidden,
            "image_start_id": ids["<img>"],
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# (modality, key) -> how each row is proven (see tests.tiny.Proof). A video row runs its
# image row's checkpoint (tests/e2e/test_video_e2e.py): the processor carries the real video
# processor. Qwen2.5-Omni's image and video rows run the audio row's checkpoint: its processor
# carries the real Qwen2-VL image and video processors.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "qwen2_vl"): Proof(build_qwen2_vl),
    ("video", "qwen2_vl"): Proof(build_qwen2_vl),
    ("image", "qwen2_5_vl"): Proof(build_qwen2_5_vl),
    ("video", "qwen2_5_vl"): Proof(build_qwen2_5_vl),
    ("audio", "qwen2_audio"): Proof(build_qwen2_audio),
    ("audio", "qwen2_5_omni"): Proof(build_qwen2_5_omni),
    ("image", "qwen2_5_omni"): Proof(build_qwen2_5_omni),
    ("video", "qwen2_5_omni"): Proof(build_qwen2_5_omni),
    ("audio", "qwen3_asr"): Proof(build_qwen3_asr),
    # Qwen3-VL's generate prompt is its real format (written by hand, as vLLM's example does);
    # its chat method renders the stand-in template.
    ("image", "qwen3_vl"): Proof(build_qwen3_vl, standin="chat template"),
    ("video", "qwen3_vl"): Proof(build_qwen3_vl, standin="chat template"),
    ("image", "qwen3_vl_moe"): Proof(build_qwen3_vl_moe, standin="chat template"),
    ("video", "qwen3_vl_moe"): Proof(build_qwen3_vl_moe, standin="chat template"),
    ("image", "qwen3_5"): Proof(build_qwen3_5, standin="chat template"),
    ("video", "qwen3_5"): Proof(build_qwen3_5, standin="chat template"),
    ("image", "qwen3_5_moe"): Proof(build_qwen3_5_moe, standin="chat template"),
    ("video", "qwen3_5_moe"): Proof(build_qwen3_5_moe, standin="chat template"),
    # The prompt string is the loader's, but its tokenization (the image tags, the specials)
    # is done by the stand-in tokenizer class.
    ("image", "qwen_vl_chat"): Proof(
        build_qwen_vl_chat, env="0.23", standin="config and tokenizer classes", real_prompt=False
    ),
}
