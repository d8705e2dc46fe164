"""Tiny checkpoints of Moonshot's Kimi models (see tests/tiny/__init__.py): Kimi-Audio,
Kimi-VL and Kimi K2.5.

Kimi-Audio's config class and Kimi-VL's processor classes are remote code: STAND-INS
(tests/tiny/standins/kimi_audio/, kimi_vl/) written by this project from what vLLM 0.32 reads
and calls. They prove vLLM's own processor, placeholder expansion and model path; they do not
prove the original classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, byte_level_tiktoken, copy_standins, write_json

# ---------------------------------------------------------------------------------------------
# Kimi-Audio

# Ids that vLLM hard-codes for Kimi-Audio (vllm/transformers_utils/processors/kimi_audio.py,
# vllm/tokenizers/kimi_audio.py); the names of 151643/151644 are this project's.
_KIMIA_SPECIALS = {
    151643: "<|im_kimia_bos|>",
    151644: "<|im_kimia_eos|>",
    151645: "<|im_msg_end|>",
    151661: "<|im_media_begin|>",
    151663: "<|im_media_end|>",
    151666: "<|im_kimia_text_blank|>",
    151670: "<|im_kimia_user_msg_start|>",
    151671: "<|im_kimia_assistant_msg_start|>",
}


def build_kimi_audio(dest: Path) -> TinyCheckpoint:
    """Kimi-Audio-7B-Instruct (``MoonshotKimiaForCausalLM``): stand-in config class; vLLM's
    own tokenizer (tiktoken.model + tokenizer_config.json's added_tokens_decoder), processor
    and Whisper encoder (config and feature extractor in ``whisper-large-v3/``). The vocabulary
    must reach the hard-coded ids (151671): 151680 embedding rows of width 128."""
    import transformers

    tf: Any = transformers  # untyped: its processor classes have no annotations
    dest.mkdir(parents=True, exist_ok=True)
    copy_standins("kimi_audio", dest, "configuration_moonshot_kimia.py")
    byte_level_tiktoken(dest / "tiktoken.model")
    decoder = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in _KIMIA_SPECIALS.items()
    }
    (dest / "tokenizer_config.json").write_text(
        json.dumps({"added_tokens_decoder": decoder}, indent=2) + "\n"
    )
    whisper_width = 128
    config = {
        "architectures": ["MoonshotKimiaForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_moonshot_kimia.MoonshotKimiaConfig"},
        "model_type": "moonshot_kimia",
        **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},
        "vocab_size": 151680,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 151643,
        "eos_token_id": 151644,
        "kimia_adaptor_input_dim": 4 * whisper_width,
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    sub = dest / "whisper-large-v3"
    tf.WhisperConfig(
        d_model=whisper_width,
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=256,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_ffn_dim=256,
        num_mel_bins=128,
        max_source_positions=1500,
        vocab_size=512,  # the decoder is never built; its token ids only need to fit
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        decoder_start_token_id=0,
    ).save_pretrained(str(sub))
    tf.WhisperFeatureExtractor(feature_size=128).save_pretrained(str(sub))
    # One request per engine step, as kimi_audio's spec says (max_num_seqs=1; the CPU sizes'
    # 2 would override it): vLLM 0.32's Kimi-Audio pads each clip's features only to the
    # longest clip of its own request, and when two requests with clips of different lengths
    # share a step, its model gets a list instead of a tensor and fails ("'list' object has
    # no attribute 'dim'", kimi_audio.py _process_audio_input).
    return TinyCheckpoint(dest, {**DUMMY_ENGINE, "max_num_seqs": 1, "max_num_batched_tokens": 2048})


# ---------------------------------------------------------------------------------------------
# Kimi-VL

# STAND-IN chat template for Kimi-VL (its real one ships with the remote processor): its turn
# markers (<|im_user|>user<|im_middle|>...<|im_end|>) and media placeholder, string or part
# contents.
_KIMI_VL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}<|im_user|>{% elif message['role'] == 'assistant' %}"
    "<|im_assistant|>{% else %}<|im_system|>{% endif %}{{ message['role'] }}<|im_middle|>"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|media_start|>image<|media_content|><|media_pad|><|media_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
)

_KIMI_VL_SPECIALS = [
    "[BOS]",
    "[EOS]",
    "<|im_end|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|media_start|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
]


def build_kimi_vl(dest: Path) -> TinyCheckpoint:
    """Kimi-VL-A3B-Instruct (``KimiVLForConditionalGeneration``): vLLM's own config class
    (KimiVLConfig, MoonViTConfig); STAND-IN processor and image processor classes and chat
    template; a generic tokenizer with Kimi's turn and media tokens. The tower is a tiny
    MoonViT (14-pixel patches, 2 x 2 merge kernel); in_token_limit 256 patches keeps an image
    at about 64 tokens. Text model: vLLM's DeepseekV2ForCausalLM, 1 dense layer with multi-head
    latent attention (the real one is a DeepSeek-V3-style MoE)."""
    tok = build_tokenizer(
        dest,
        _KIMI_VL_SPECIALS,
        chat_template=_KIMI_VL_TEMPLATE,
        bos_token="[BOS]",
        eos_token="<|im_end|>",
    )
    ids = token_ids(tok, _KIMI_VL_SPECIALS)
    copy_standins("kimi_vl", dest)
    config = {
        "architectures": ["KimiVLForConditionalGeneration"],
        "model_type": "kimi_vl",
        "media_placeholder_token_id": ids["<|media_pad|>"],
        "vision_config": {
            "model_type": "moonvit",
            "patch_size": 14,
            "init_pos_emb_height": 16,
            "init_pos_emb_width": 16,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "merge_kernel_size": [2, 2],
        },
        "text_config": {
            "model_type": "deepseek_v2",
            "vocab_size": padded_vocab_size(tok),
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": TINY_TEXT["intermediate_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            # Multi-head latent attention of DeepSeek-V3's sizes: vLLM's CPU MLA kernel takes
            # only a 512 + 64 latent.
            "kv_lora_rank": 512,
            "q_lora_rank": None,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            # Every layer dense (first_k_dense_replace): the MoE sizes are only declared.
            "first_k_dense_replace": 1,
            "n_routed_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 64,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["[BOS]"],
            "eos_token_id": ids["<|im_end|>"],
        },
    }
    write_json(dest / "config.json", config)
    auto_map = {
        "AutoImageProcessor": "image_processing_kimi_vl.KimiVLImageProcessor",
        "AutoProcessor": "processing_kimi_vl.KimiVLProcessor",
    }
    write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "KimiVLImageProcessor",
            "processor_class": "KimiVLProcessor",
            "patch_size": 14,
            "merge_kernel_size": [2, 2],
            "in_token_limit": 256,
            "auto_map": auto_map,
        },
    )
    write_json(
        dest / "processor_config.json",
        {
            "processor_class": "KimiVLProcessor",
            "auto_map": {"AutoProcessor": auto_map["AutoProcessor"]},
        },
    )
    (dest / "chat_template.jinja").write_text(_KIMI_VL_TEMPLATE)
    return TinyCheckpoint(dest, {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096})


# ---------------------------------------------------------------------------------------------
# Kimi K2.5

# Kimi K2.5's turn and media tokens (mmrun's hand-written prompt uses them all).
_KIMI_K25_SPECIALS = [
    "[BOS]",
    "[EOS]",
    "<|im_end|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|media_begin|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
]


def build_kimi_k25(dest: Path) -> TinyCheckpoint:
    """Kimi K2.5 (``KimiK25ForConditionalGeneration``) without remote code: transformers'
    Kimi_K25Config (the class vLLM 0.32 registers for ``kimi_k25``), vLLM's own
    KimiK25Processor with its fused vision-chunk image processor (KimiK25FusedVisionProcessor,
    used when numba is installed; it reads ``media_proc_cfg`` from preprocessor_config.json),
    and a generic tokenizer with Kimi's turn and media tokens (the real one is a remote
    TikToken class). The tower is a tiny MoonViT-3D (14-pixel patches, 2 x 2 merge, 4-frame
    temporal pooling); in_patch_limit 256 keeps an image at most 64 tokens. Text model:
    vLLM's DeepseekV2ForCausalLM on a DeepSeek-V3 config (multi-head latent attention, one
    dense layer then one layer of 4 routed experts, 2 per token, and a shared expert)."""
    tok = build_tokenizer(dest, _KIMI_K25_SPECIALS, bos_token="[BOS]", eos_token="<|im_end|>")
    ids = token_ids(tok, _KIMI_K25_SPECIALS)
    text = {
        "model_type": "deepseek_v3",
        "vocab_size": padded_vocab_size(tok),
        "hidden_size": TINY_TEXT["hidden_size"],
        "intermediate_size": TINY_TEXT["intermediate_size"],
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        # Multi-head latent attention of DeepSeek-V3's sizes: vLLM's CPU MLA kernel takes
        # only a 512 + 64 latent.
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "first_k_dense_replace": 1,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "n_group": 1,
        "topk_group": 1,
        "moe_intermediate_size": 64,
        "max_position_embeddings": 4096,
        "bos_token_id": ids["[BOS]"],
        "eos_token_id": ids["<|im_end|>"],
    }
    config = {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "image_token_id": ids["<|media_pad|>"],
        "vision_start_token_id": ids["<|media_begin|>"],
        "vision_end_token_id": ids["<|media_end|>"],
        "vision_config": {
            "patch_size": 14,
            "pos_emb_height": 16,
            "pos_emb_width": 16,
            "pos_emb_time": 4,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "merge_kernel_size": [2, 2],
        },
        "text_config": text,
        "tie_word_embeddings": False,
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    media_proc_cfg = {
        "patch_size": 14,
        "merge_kernel_size": 2,
        "in_patch_limit": 256,
        "patch_limit_on_one_side": 64,
        "fixed_output_tokens": None,
        "temporal_merge_kernel_size": 4,
        "in_patch_limit_each_frame": None,
        "in_patch_limit_video": None,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    preprocessor = {"media_proc_cfg": media_proc_cfg}
    (dest / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy", "max_model_len": 4096})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the loader's own (hand-written); only the config class is a stand-in.
    ("audio", "kimi_audio"): Proof(build_kimi_audio, standin="config class"),
    # The prompt comes from the stand-in chat template: the engine path only.
    ("image", "kimi_vl"): Proof(
        build_kimi_vl,
        standin="processor classes, chat template, generic tokenizer",
        real_prompt=False,
    ),
    ("image", "kimi_k25"): Proof(build_kimi_k25, standin="generic tokenizer"),
}
