"""Tiny checkpoint of dots.ocr (see tests/tiny/__init__.py), whose config class is remote
code: a STAND-IN (tests/tiny/standins/dots_ocr/), named in config.json's ``auto_map`` as the Hub
repository does and run with ``--trust-remote-code``. The tokenizer is trained locally
(byte-level BPE) with the model's real special tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, token_ids
from tests.tiny import Proof
from tests.tiny._common import copy_standins, text_config, write_json

# The dots.ocr tokenizer's added tokens (Qwen2's, then its own turn and image tokens).
_DOTS_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|video_pad|>",
    "<|imgpad|>",
    "<|img|>",
    "<|endofimg|>",
    "<|user|>",
    "<|endofuser|>",
    "<|assistant|>",
    "<|endofassistant|>",
)


def build_dots_ocr(dest: Path) -> TinyCheckpoint:
    """dots.ocr (``DotsOCRForCausalLM``: a NaViT-style tower with 2x2 patch merging, Qwen2
    text). The config class named in auto_map is a STAND-IN (tests/tiny/standins/dots_ocr/:
    vLLM's own DotsOCRConfig, which vLLM does not register); the Hub's auto_map also names a
    processor class, which vLLM does not use: it builds transformers' Qwen2VLProcessor over
    the checkpoint's Qwen2-VL image processor (14-pixel patches, one per frame)."""
    import transformers

    tf: Any = transformers
    copy_standins("dots_ocr", dest, "configuration_dots.py")
    tokenizer = build_tokenizer(
        dest,
        _DOTS_SPECIALS,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _DOTS_SPECIALS)
    text = text_config(
        tokenizer,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"],
        rope_theta=1000000.0,
        tie_word_embeddings=False,
    )
    patch = 14
    config = {
        "architectures": ["DotsOCRForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_dots.DotsOCRConfig"},
        "model_type": "dots_ocr",
        **text,
        "image_token_id": ids["<|imgpad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_config": {
            "embed_dim": 64,
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 1,
            "rms_norm_eps": 1e-5,
            "use_bias": False,
            "post_norm": True,
            "attn_implementation": "sdpa",
        },
    }
    write_json(dest / "config.json", config)
    # At most 16 merged 28x28 patches per image: a few placeholder tokens each.
    processor = tf.Qwen2VLImageProcessor(
        size={"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28},
        patch_size=patch,
        temporal_patch_size=1,
        merge_size=2,
    )
    processor.save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the loader's hand-written one (vLLM's example), so real; the checkpoint
    # carries no chat template, so the test runs generate only.
    ("image", "dots_ocr"): Proof(build_dots_ocr, standin="config class (vLLM's)"),
}
