"""Tiny checkpoint of DeepSeek-VL2 (see tests/tiny/__init__.py), whose vLLM module needs
timm (``make install`` installs it, requirements/vllm-cpu.txt); and why DeepSeek-OCR and
DeepSeek-OCR 2 have none.
"""

# DeepSeek-VL2's real token names use the fullwidth vertical bar (U+FF5C).
# ruff: noqa: RUF001

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    token_ids,
)
from tests.tiny import Proof

_DEEPSEEK_SPECIALS = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜▁pad▁｜>",
    "<image>",
    "<|User|>",
    "<|Assistant|>",
)


def build_deepseek_vl_v2(dest: Path) -> TinyCheckpoint:
    """DeepSeek-VL2-tiny (``DeepseekVLV2ForCausalLM``): vLLM's own config (model_type
    "deepseek_vl_v2") and processor (``processor_class: DeepseekVLV2Processor``); a 1-layer
    dense DeepSeek-V2 text model without MLA (deepseek-vl2-tiny's has no MLA either). The vision tower is the REAL
    one: vLLM builds ``timm.create_model("vit_so400m_patch14_siglip_384.webli")`` whatever the
    config says (428M parameters; about 7 s per 384-pixel crop on 2 CPU threads). One
    candidate resolution, 384 x 384: each image is a global view and one local tile, 421
    tokens."""
    import json

    tok = build_tokenizer(
        dest,
        _DEEPSEEK_SPECIALS,
        prepend="<｜begin▁of▁sentence｜>",
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
        pad_token="<｜▁pad▁｜>",
    )
    ids = token_ids(tok, _DEEPSEEK_SPECIALS)
    size = 384
    config = {
        "model_type": "deepseek_vl_v2",
        "architectures": ["DeepseekVLV2ForCausalLM"],
        "tile_tag": "2D",
        "global_view_pos": "head",
        "candidate_resolutions": [[size, size]],
        "vision_config": {"model_name": "vit_so400m_patch14_siglip_384.webli", "image_size": size},
        "projector_config": {
            "projector_type": "downsample_mlp_gelu",
            "input_dim": 1152,  # the SigLIP-so400m tower's width
            "n_embed": TINY_TEXT["hidden_size"],
            "depth": 2,
            "mlp_ratio": 1,
            "downsample_ratio": 2,
        },
        "language_config": {
            "model_type": "deepseek_v2",
            "architectures": ["DeepseekV2ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": TINY_TEXT["intermediate_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "kv_lora_rank": None,  # no MLA: plain multi-head attention, as deepseek-vl2-tiny
            "q_lora_rank": None,
            "qk_nope_head_dim": 0,  # with qk_rope_head_dim 0: vLLM's DeepseekAttention (MHA)
            "qk_rope_head_dim": 0,
            "v_head_dim": 0,
            # Every layer dense (first_k_dense_replace): the MoE sizes are only declared.
            "first_k_dense_replace": 1,
            "n_routed_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 64,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<｜begin▁of▁sentence｜>"],
            "eos_token_id": ids["<｜end▁of▁sentence｜>"],
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    processor = {
        "processor_class": "DeepseekVLV2Processor",
        "candidate_resolutions": [[size, size]],
        "patch_size": 14,
        "downsample_ratio": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "normalize": True,
        "image_token": "<image>",
        "pad_token": "<｜▁pad▁｜>",
        "add_special_token": False,
        "sft_format": "deepseek",
        "mask_prompt": False,
        "ignore_id": -100,
    }
    (dest / "processor_config.json").write_text(
        json.dumps(processor, indent=2, ensure_ascii=False) + "\n"
    )
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 2048})


PROOFS: dict[tuple[str, str], Proof] = {
    # Not in CI: vLLM builds the real 428M-parameter SigLIP tower whatever the config says;
    # its test_cli_e2e case took 459 s on the shared 2-core machine (load average 4-8).
    ("image", "deepseek_vl_v2"): Proof(build_deepseek_vl_v2, in_ci=False),
}

# Why the other DeepSeek rows have no offline proof on vLLM 0.32.
UNPROVEN: dict[tuple[str, str], str] = {
    # vLLM's own config and processor classes would do, but its model builds full-size SAM
    # ViT-B and CLIP-L towers whatever the config says, and runs 1024-pixel global views.
    ("image", "deepseek_ocr"): "not built: vLLM hard-codes full-size SAM ViT-B and CLIP-L towers",
    # vLLM's own model builds a full-size SAM ViT-B tower and a 24-layer, 896-wide Qwen2
    # encoder whatever the config says, and runs 768-pixel crops.
    ("image", "deepseek_ocr2"): (
        "not built: vLLM hard-codes full-size SAM ViT-B and Qwen2 encoder towers"
    ),
}
