"""Tiny checkpoint of PaddleOCR-VL (see tests/tiny/__init__.py). Its loader writes the prompt
by hand, so the checkpoint proves the real prompt format.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    build_tokenizer,
    save_config,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import text_config


def build_paddleocr_vl(dest: Path) -> TinyCheckpoint:
    """PaddleOCR-VL (``PaddleOCRVLForConditionalGeneration``: SigLIP NaViT tower, ERNIE-4.5
    text): transformers' own config and processor classes, config only (vLLM initialises
    random weights). The loader writes the prompt by hand, so this proves the real format.

    Trap: vLLM reads the image processor's size as the Hub's remote processor spells it
    (``min_pixels``/``max_pixels``) when ``trust_remote_code`` is on, and as transformers'
    own class spells it (``shortest_edge``/``longest_edge``) when it is off; this checkpoint
    carries transformers' class, so it runs with trust_remote_code off.
    """
    import json

    tf = transformers_module()
    specials = [
        "<unk>",
        "<|begin_of_sentence|>",
        "<|end_of_sentence|>",
        "<|IMAGE_START|>",
        "<|IMAGE_PLACEHOLDER|>",
        "<|IMAGE_END|>",
        "<|video_pad|>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        unk_token="<unk>",
        bos_token="<|begin_of_sentence|>",
        eos_token="<|end_of_sentence|>",
        image_token="<|IMAGE_PLACEHOLDER|>",
    )
    ids = token_ids(tokenizer, specials)
    # 14-pixel patches merged 2 x 2, as the real model; 4 to 16 merged tokens per image.
    processor = tf.PaddleOCRVLProcessor(
        image_processor=tf.PaddleOCRVLImageProcessor(
            size={"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
        ),
        tokenizer=tokenizer,
    )
    processor.save_pretrained(str(dest))
    config = tf.PaddleOCRVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 56,
            "patch_size": 14,
            "spatial_merge_size": 2,
        },
        text_config=text_config(
            tokenizer,
            # mrope over head_dim 64: 8 + 12 + 12 = 32 rotary pairs (the real 16/24/24 is for 128).
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 500000.0,
                "mrope_section": [8, 12, 12],
            },
            bos_token_id=ids["<|begin_of_sentence|>"],
            eos_token_id=ids["<|end_of_sentence|>"],
            pad_token_id=ids["<unk>"],
        ),
        image_token_id=ids["<|IMAGE_PLACEHOLDER|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|IMAGE_START|>"],
        vision_end_token_id=ids["<|IMAGE_END|>"],
    )
    save_config(config, dest, "PaddleOCRVLForConditionalGeneration")
    (dest / "generation_config.json").write_text(json.dumps({"do_sample": False}))
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy", "trust_remote_code": False})


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "paddleocr_vl"): Proof(build_paddleocr_vl),
}
