"""Tiny checkpoint of ERNIE-4.5-VL, whose config and processor classes are remote code, with
STAND-IN classes (tests/tiny/standins/ernie45_vl/) written by this project from what vLLM 0.32
reads and calls. transformers' own Ernie4_5_VLMoe classes do not fit vLLM 0.32's model: their
config nests the text model and lacks the resampler and vision token fields, and their
processor returns ``pixel_values``/``image_grid_thw`` where vLLM reads ``images``/``grid_thw``.
The row proves vLLM's processor path, placeholder expansion and model, not the original classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import copy_standins, write_json

_FILES = (
    "configuration_ernie_45t_vl.py",
    "image_processing_ernie_45t_vl.py",
    "processing_ernie_45t_vl.py",
)

_SPECIALS = (
    "<|begin_of_sentence|>",
    "<|end_of_sentence|>",
    "<|IMAGE_PLACEHOLDER|>",
    "<|IMAGE_START|>",
    "<|IMAGE_END|>",
    "<|VIDEO_START|>",
    "<|VIDEO_END|>",
    "<|image@placeholder|>",
    "<|video@placeholder|>",
    "<think>",
    "</think>",
)

# vLLM 0.32's CPU backend runs the rotary embedding through MRotaryEmbedding.forward_cpu, which
# passes an ``offsets`` argument that Ernie4_5_VLRotaryEmbedding.forward_native does not take
# (TypeError); with the custom op off, vLLM calls forward_native as the model does.
_ENGINE: dict[str, Any] = {
    "load_format": "dummy",
    "max_num_seqs": 2,
    "max_model_len": 2048,
    "compilation_config": {"custom_ops": ["-rotary_embedding"]},
}

# STAND-IN chat template in the turn format of the loader's prompt (the checkpoint's own
# template is in its Hub files): "User: " with the text parts, then the numbered media, and
# "Assistant: " with an empty thought.
_TEMPLATE = (
    "<|begin_of_sentence|>{% set n = namespace(image=0, video=0) %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}User: {% elif message['role'] == 'assistant' %}"
    "Assistant: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{% set n.image = n.image + 1 %}Picture {{ n.image }}:"
    "<|IMAGE_START|><|image@placeholder|><|IMAGE_END|>"
    "{% elif part['type'] == 'video' %}{% set n.video = n.video + 1 %}Video {{ n.video }}:"
    "<|VIDEO_START|><|video@placeholder|><|VIDEO_END|>{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'assistant' %}<|end_of_sentence|>{% else %}{{ '\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}Assistant: <think></think>{% endif %}"
)


def build_ernie45_vl(dest: Path) -> TinyCheckpoint:
    """ERNIE-4.5-VL-28B-A3B (``Ernie4_5_VLMoeForConditionalGeneration``: a ViT with 2-D
    rotary positions, a resampler merging 2x2 patches (and 2 frames of a video), one MoE text
    layer with separate text and vision experts, 3-D rotary positions) with STAND-IN config,
    processor and image processor classes and chat template. The tokenizer is trained
    locally, with the real special tokens."""
    copy_standins("ernie45_vl", dest, *_FILES)
    (dest / "chat_template.jinja").write_text(_TEMPLATE)
    tok = build_tokenizer(
        dest,
        _SPECIALS,
        chat_template=_TEMPLATE,
        bos_token="<|begin_of_sentence|>",
        eos_token="<|end_of_sentence|>",
    )
    ids = token_ids(tok, _SPECIALS)
    patch, width = 14, 64
    write_json(
        dest / "config.json",
        {
            "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_ernie_45t_vl.Ernie4_5_VLMoEConfig"},
            "model_type": "ernie4_5_moe_vl",
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|begin_of_sentence|>"],
            "eos_token_id": ids["<|end_of_sentence|>"],
            "tie_word_embeddings": True,
            # Two text and two vision experts of width 64, one shared, in the one layer.
            "moe_num_experts": [2, 2],
            "moe_num_shared_experts": 1,
            "moe_k": 1,
            "moe_intermediate_size": [64, 64],
            "moe_layer_start_index": [0, 0],
            "moe_layer_end_index": [0, 0],
            "pixel_hidden_size": width,
            "spatial_conv_size": 2,
            "temporal_conv_size": 2,
            "use_temporal_conv": True,
            "im_patch_id": ids["<|IMAGE_PLACEHOLDER|>"],
            "image_start_token_id": ids["<|IMAGE_START|>"],
            "image_end_token_id": ids["<|IMAGE_END|>"],
            "video_start_token_id": ids["<|VIDEO_START|>"],
            "video_end_token_id": ids["<|VIDEO_END|>"],
            "vision_config": {
                "depth": 1,
                "embed_dim": width,
                "hidden_size": width,
                "num_heads": 2,
                "mlp_ratio": 2.0,
                "patch_size": patch,
                "spatial_merge_size": 2,
            },
        },
    )
    # The real preprocessor settings with smaller images: at most 16 merged 28x28 patches.
    merged = 2 * patch
    write_json(
        dest / "preprocessor_config.json",
        {
            "min_pixels": 4 * merged * merged,
            "max_pixels": 16 * merged * merged,
            "patch_size": patch,
            "merge_size": 2,
            "processor_class": "Ernie_45T_VLProcessor",
            "auto_map": {
                "AutoProcessor": "processing_ernie_45t_vl.Ernie_45T_VLProcessor",
                "AutoImageProcessor": "image_processing_ernie_45t_vl.Ernie4_5_VLImageProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, _ENGINE)


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "ernie45_vl"): Proof(
        build_ernie45_vl,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
    ),
    # The video loader's prompt is hand-written (no chat template); tests/e2e/test_video_e2e.py.
    ("video", "ernie45_vl"): Proof(
        build_ernie45_vl, standin="config, processor and image processor classes"
    ),
}
