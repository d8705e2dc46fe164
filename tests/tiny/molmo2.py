"""Tiny checkpoint of Molmo2, whose config and processor classes are remote code, with
STAND-IN classes (tests/tiny/standins/molmo2/) written by this project from what vLLM 0.32's
molmo2.py reads and calls: the config (vision transformer, adapter and text sub-configs, the
image and frame token ids), the processor, and its image and video processors. vLLM expands
the ``<|image|>`` and ``<|video|>`` placeholders itself from the processors' settings and
checks the processors' outputs against them, so the row proves vLLM's processor path,
placeholder expansion and model, not the original classes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof

_STANDIN = Path(__file__).resolve().parent / "standins" / "molmo2"
_FILES = (
    "configuration_molmo2.py",
    "processing_molmo2.py",
    "image_processing_molmo2.py",
    "video_processing_molmo2.py",
)
# Molmo2's added tokens: Qwen's turn tokens, then the image and frame tokens and the two
# placeholders, in the checkpoint's order.
_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<im_start>",
    "<im_end>",
    "<im_patch>",
    "<im_col>",
    "<low_res_im_start>",
    "<|image|>",
    "<im_low>",
    "<frame_start>",
    "<frame_end>",
    "<|video|>",
)

# STAND-IN chat template (the checkpoint's own is in its Hub files): the media placeholders
# first, as the video loader's prompt has them, then ChatML turns.
_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['content'] is string %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|image|>' }}"
    "{% elif part['type'] == 'video' %}{{ '<|video|>' }}{% endif %}{% endfor %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{{ '<|im_end|>\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def build_molmo2(dest: Path) -> TinyCheckpoint:
    """Molmo2-8B (``Molmo2ForConditionalGeneration``: a SigLIP-style ViT whose 3rd and 9th
    layers from the top are joined, attention pooling of 2x2 patches per image token (3x3 per
    frame token), a Qwen3-style text model with QK norm) with STAND-IN config, processor,
    image and video processor classes and chat template. The real geometry is kept (378-pixel
    crops and frames of 14-pixel patches, 4-patch overlap margins, 729 positions), with tiny
    widths: the ViT 9 layers of 32, the adapter 32 wide, one text layer of 128. The image
    processor allows 2 tile crops (the real one more), so an image is 2 or 3 crops."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _FILES:
        shutil.copy(_STANDIN / name, dest / name)
    (dest / "chat_template.jinja").write_text(_TEMPLATE)
    tokenizer = build_tokenizer(
        dest,
        _SPECIALS,
        chat_template=_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _SPECIALS)
    vit_width = 32
    _write_json(
        dest / "config.json",
        {
            "architectures": ["Molmo2ForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_molmo2.Molmo2Config"},
            "model_type": "molmo2",
            "vit_config": {
                "hidden_size": vit_width,
                "intermediate_size": 2 * vit_width,
                "num_hidden_layers": 9,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "head_dim": vit_width // 2,
                "hidden_act": "gelu_pytorch_tanh",
                "layer_norm_eps": 1e-6,
                "image_default_input_size": [378, 378],
                "image_patch_size": 14,
                "image_num_pos": 729,
            },
            "adapter_config": {
                "vit_layers": [-3, -9],
                "pooling_attention_mask": True,
                "hidden_size": vit_width,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "head_dim": vit_width // 2,
                "hidden_act": "silu",
                "intermediate_size": 2 * TINY_TEXT["hidden_size"],
                "text_hidden_size": TINY_TEXT["hidden_size"],
            },
            "text_config": {
                **TINY_TEXT,
                "vocab_size": padded_vocab_size(tokenizer),
                "additional_vocab_size": 128,
                "qkv_bias": False,
                "hidden_act": "silu",
                "rope_theta": 1000000.0,
                "use_qk_norm": True,
                "qk_norm_type": "qwen3",
                "layer_norm_eps": 1e-6,
                "norm_after": False,
            },
            "image_start_token_id": ids["<im_start>"],
            "image_end_token_id": ids["<im_end>"],
            "image_patch_id": ids["<im_patch>"],
            "image_col_id": ids["<im_col>"],
            "low_res_image_start_token_id": ids["<low_res_im_start>"],
            "image_low_res_id": ids["<im_low>"],
            "frame_start_token_id": ids["<frame_start>"],
            "frame_end_token_id": ids["<frame_end>"],
            "use_frame_special_tokens": True,
            "tie_word_embeddings": False,
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
    )
    _write_json(
        dest / "processor_config.json",
        {
            "processor_class": "Molmo2Processor",
            "auto_map": {"AutoProcessor": "processing_molmo2.Molmo2Processor"},
            "image_use_col_tokens": True,
            "use_single_crop_col_tokens": False,
            "use_single_crop_start_token": True,
            "video_use_col_tokens": False,
            "use_frame_special_tokens": True,
        },
    )
    _write_json(
        dest / "preprocessor_config.json",
        {
            "size": {"height": 378, "width": 378},
            "patch_size": 14,
            "pooling_size": [2, 2],
            "max_crops": 2,
            "overlap_margins": [4, 4],
            "processor_class": "Molmo2Processor",
            "auto_map": {
                "AutoProcessor": "processing_molmo2.Molmo2Processor",
                "AutoImageProcessor": "image_processing_molmo2.Molmo2ImageProcessor",
            },
        },
    )
    _write_json(
        dest / "video_preprocessor_config.json",
        {
            "size": {"height": 378, "width": 378},
            "patch_size": 14,
            "pooling_size": [3, 3],
            "num_frames": 384,
            "frame_sample_mode": "uniform_last_frame",
            "max_fps": 2,
            "sampling_fps": 2,
            "processor_class": "Molmo2Processor",
            "auto_map": {
                "AutoProcessor": "processing_molmo2.Molmo2Processor",
                "AutoVideoProcessor": "video_processing_molmo2.Molmo2VideoProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The image loader renders the chat template: the stand-in one, for generate and chat.
    ("image", "molmo2"): Proof(
        build_molmo2,
        standin="config, processor, image and video processor classes, chat template",
        real_prompt=False,
    ),
    # The video loader's prompt is hand-written (vLLM's example); tests/e2e/test_video_e2e.py.
    ("video", "molmo2"): Proof(
        build_molmo2, standin="config, processor, image and video processor classes"
    ),
}
