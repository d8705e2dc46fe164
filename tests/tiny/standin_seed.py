"""Tiny checkpoints of image seed rows whose processor classes are remote code, with STAND-IN
classes (tests/tiny/standins/) written by this project from what vLLM 0.32 reads and calls.
They prove vLLM's own multimodal processor, placeholder expansion and model path; they do
not prove the original classes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny.standin import _place_tokens

_STANDINS = Path(__file__).parent / "standins"


def _copy_standins(model: str, dest: Path) -> None:
    for source in sorted((_STANDINS / model).glob("*.py")):
        shutil.copy(source, dest)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


# Phi-3.5-vision's special tokens at their ids; vLLM 0.32 hard-codes <|image|> = 32044.
_PHI3_TOKENS = {
    32000: "<|endoftext|>",
    32001: "<|assistant|>",
    32007: "<|end|>",
    32010: "<|user|>",
    32044: "<|image|>",
}


def build_phi3_v(dest: Path) -> TinyCheckpoint:
    """Phi-3.5-vision (``Phi3VForCausalLM``): STAND-IN config, processor and image processor
    classes; vLLM's own multimodal processor and model. vLLM builds the CLIP ViT-L/14-336
    tower from a hard-coded config (1024 wide, 336-pixel crops): ``layer_idx`` 0 keeps one of
    its layers. The vocabulary must reach the hard-coded image id (32064 embedding rows)."""
    tok = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>"],
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    tok = _place_tokens(tok, _PHI3_TOKENS, dest)
    _copy_standins("phi3_v", dest)
    config = {
        "architectures": ["Phi3VForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_phi3_v.Phi3VConfig",
            "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
        },
        "model_type": "phi3_v",
        **TINY_TEXT,
        "vocab_size": 32064,
        "bos_token_id": 1,
        "eos_token_id": 32000,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "embd_layer": {
            "embedding_cls": "image",
            "hd_transform_order": "sub_glb",
            "projection_cls": "mlp",
            "use_hd_transform": True,
            "with_learnable_separator": True,
        },
        "img_processor": {
            "image_dim_out": 1024,
            "model_name": "openai/clip-vit-large-patch14-336",
            "name": "clip_vision_model",
            "num_img_tokens": 144,
            "layer_idx": 0,
        },
    }
    _write_json(dest / "config.json", config)
    auto_map = {
        "AutoImageProcessor": "image_processing_phi3_v.Phi3VImageProcessor",
        "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
    }
    _write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "Phi3VImageProcessor",
            "processor_class": "Phi3VProcessor",
            "num_crops": 4,
            "auto_map": auto_map,
        },
    )
    _write_json(
        dest / "processor_config.json",
        {
            "processor_class": "Phi3VProcessor",
            "auto_map": {"AutoProcessor": auto_map["AutoProcessor"]},
        },
    )
    return TinyCheckpoint(dest, {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096})


# STAND-IN chat template for Kimi-VL (its real one ships with the remote processor): its turn
# markers (<|im_user|>user<|im_middle|>...<|im_end|>) and media placeholder, string or part
# contents.
_KIMI_TEMPLATE = (
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
_KIMI_SPECIALS = [
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
        _KIMI_SPECIALS,
        chat_template=_KIMI_TEMPLATE,
        bos_token="[BOS]",
        eos_token="<|im_end|>",
    )
    ids = token_ids(tok, _KIMI_SPECIALS)
    _copy_standins("kimi_vl", dest)
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
    _write_json(dest / "config.json", config)
    auto_map = {
        "AutoImageProcessor": "image_processing_kimi_vl.KimiVLImageProcessor",
        "AutoProcessor": "processing_kimi_vl.KimiVLProcessor",
    }
    _write_json(
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
    _write_json(
        dest / "processor_config.json",
        {
            "processor_class": "KimiVLProcessor",
            "auto_map": {"AutoProcessor": auto_map["AutoProcessor"]},
        },
    )
    (dest / "chat_template.jinja").write_text(_KIMI_TEMPLATE)
    return TinyCheckpoint(dest, {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the seed's hand-written one (no chat template in the checkpoint); the
    # stand-in processor only sets how many placeholder tokens an image expands to.
    ("image", "phi3_v"): Proof(build_phi3_v, standin="config, processor classes"),
    # The prompt comes from the stand-in chat template: the engine path only.
    ("image", "kimi_vl"): Proof(
        build_kimi_vl,
        standin="processor classes, chat template, generic tokenizer",
        real_prompt=False,
    ),
}
