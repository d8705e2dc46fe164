"""Tiny Qwen2-VL / Qwen2.5-VL checkpoints (``mmrun selftest``, and the tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    token_ids,
    transformers_module,
)

# The real template of Qwen/Qwen2-VL-7B-Instruct and Qwen/Qwen2.5-VL-3B-Instruct (identical).
_QWEN2_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_QWEN_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)


def _qwen_vl(dest: Path, *, version: str) -> TinyCheckpoint:
    tf = transformers_module()

    tokenizer = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _QWEN_SPECIALS)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
    text = {
        **TINY_TEXT,
        "vocab_size": padded_vocab_size(tokenizer),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12]},
    }
    vision: dict[str, Any] = {"depth": 1, "num_heads": 2, "patch_size": 14}
    config_class: Any
    if version == "2.5":
        config_class, model_class = tf.Qwen2_5_VLConfig, tf.Qwen2_5_VLForConditionalGeneration
        processor_class = tf.Qwen2_5_VLProcessor
        vision |= {
            "hidden_size": 64,
            "intermediate_size": 128,
            "out_hidden_size": TINY_TEXT["hidden_size"],
            "fullatt_block_indexes": [0],
            "window_size": 56,
        }
    else:
        config_class, model_class = tf.Qwen2VLConfig, tf.Qwen2VLForConditionalGeneration
        processor_class = tf.Qwen2VLProcessor
        vision |= {"embed_dim": 64, "mlp_ratio": 2, "hidden_size": TINY_TEXT["hidden_size"]}
    config = config_class(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    # At most 16 merged 28x28 patches per image: a few placeholder tokens per image.
    pixels = {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
    processor = processor_class(
        image_processor=tf.Qwen2VLImageProcessor(size=pixels),
        video_processor=tf.Qwen2VLVideoProcessor(size=pixels),
        tokenizer=tokenizer,
        chat_template=_QWEN2_VL_TEMPLATE,
    )
    return finish(dest, model_class, config, processor)


def build_qwen2_vl(dest: Path) -> TinyCheckpoint:
    """Qwen2-VL (``Qwen2VLForConditionalGeneration``)."""
    return _qwen_vl(dest, version="2")


def build_qwen2_5_vl(dest: Path) -> TinyCheckpoint:
    """Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``)."""
    return _qwen_vl(dest, version="2.5")
