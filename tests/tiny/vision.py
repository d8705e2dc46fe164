"""Tiny offline checkpoints for the keys only vLLM's single-image and video example has (see
tests/tiny/__init__.py and tools/upstream.py).

Their loaders write the prompt by hand, as that example does, so a checkpoint proves the real
prompt format by generate; where the chat method renders a stand-in template (the real one is
not known offline), the proof says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    finish,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import _QWEN2_VL_TEMPLATE, _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny.image import _text

# ---------------------------------------------------------------------------------------------
# Qwen3-VL


def build_qwen3_vl(dest: Path) -> TinyCheckpoint:
    """Qwen3-VL (``Qwen3VLForConditionalGeneration``: 16-pixel patches, DeepStack, interleaved
    M-RoPE), with the real Qwen3-VL image and video processors.

    Stand-in chat template (for the chat method only): Qwen2-VL's, the same turns and
    placeholders; Qwen3-VL's own adds tool calls and reasoning, and is not known offline.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _QWEN_SPECIALS)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 24/20/20 is for head_dim 128).
    text = _text(
        tokenizer,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [8, 12, 12],
            "mrope_interleaved": True,
        },
    )
    vision: dict[str, Any] = {
        "depth": 1,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "patch_size": 16,
        "out_hidden_size": TINY_TEXT["hidden_size"],
        "num_position_embeddings": 256,
        "deepstack_visual_indexes": [0],
    }
    config = tf.Qwen3VLConfig(
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
    return finish(dest, tf.Qwen3VLForConditionalGeneration, config, processor)


BUILDERS: dict[str, Builder] = {}

# Qwen3-VL's generate prompt is its real format (written by hand, as vLLM's example does); its
# chat method renders the stand-in template.
PROOFS = {("image", "qwen3_vl"): Proof(build_qwen3_vl, standin="chat template")}

# Why each other key of the single-image and video example has no offline proof.
UNPROVEN: dict[str, str] = {
    "bagel": "config and processor classes need remote code (BAGEL)",
    "dots_ocr": "config and processor classes need remote code (dots.ocr)",
    "eagle2_5": "config and processor classes need remote code (Eagle 2.5)",
    "interns1_pro": "config and processor classes need remote code (Intern-S1-Pro)",
    "kanana_v": "config and processor classes need remote code (Kanana-V)",
    "kimi_k25": "config and processor classes need remote code (Kimi K2.5); mmrun does not "
    "send its 'vision_chunk' items yet",
    "minicpmo": "config and processor classes need remote code (MiniCPM-o)",
    "minicpmv": "config and processor classes need remote code (MiniCPM-V)",
    "molmo": "config and processor classes need remote code (Molmo)",
    "nemotron_parse_35": "config and processor classes need remote code (Nemotron Parse)",
    "nemotron_vl": "config and processor classes need remote code (Nemotron Nano VL)",
    "skywork_chat": "config and processor classes need remote code (Skywork-R1V)",
}
