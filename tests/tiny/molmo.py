"""Tiny checkpoints of Molmo and Molmo2 (see tests/tiny/__init__.py), whose config and
processor classes are remote code, with STAND-IN classes (tests/tiny/standins/molmo/, molmo2/)
written by this project from what vLLM 0.32 reads and calls, copied next to config.json, whose
``auto_map`` names them, as the Hub repository does; the test runs them with
``--trust-remote-code`` as a user would.

Molmo2's stand-ins are written from what vLLM 0.32's molmo2.py reads and calls: the config
(vision transformer, adapter and text sub-configs, the image and frame token ids), the
processor, and its image and video processors. vLLM expands the ``<|image|>`` and ``<|video|>``
placeholders itself from the processors' settings and checks the processors' outputs against
them, so the rows prove vLLM's processor path, placeholder expansion and model, not the
original classes.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import copy_standins, text_config, write_json

# ---------------------------------------------------------------------------------------------
# Molmo

# STAND-IN chat template: ChatML turns after a default system turn (the checkpoint's own
# template is in its tokenizer files on the Hub).
_MOLMO_STANDIN = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Molmo's added tokens: Qwen2's, then the image tokens vLLM's molmo.py looks up.
_MOLMO_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<im_start>",
    "<im_end>",
    "<im_patch>",
    "<im_col>",
    "<|image|>",
)


def build_molmo(dest: Path) -> TinyCheckpoint:
    """Molmo-7B-D (``MolmoForCausalLM``: a CLIP ViT-L/14 tower, 2x2 attention pooling, Qwen2
    text) with STAND-IN MolmoConfig, MolmoProcessor and MolmoImageProcessor classes
    (tests/tiny/standins/molmo/) and chat template. vLLM builds the full-size tower whatever
    the config says (23 layers of 1024 at 336 pixels per crop): only the text model is tiny.
    The image processor allows one tile crop (the real one up to 12), so each image is two
    crops: the whole image and one tile."""
    copy_standins(
        "molmo", dest, "config_molmo.py", "preprocessing_molmo.py", "image_preprocessing_molmo.py"
    )
    tokenizer = build_tokenizer(
        dest,
        _MOLMO_SPECIALS,
        chat_template=_MOLMO_STANDIN,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _MOLMO_SPECIALS)
    text = text_config(tokenizer)
    config = {
        "architectures": ["MolmoForCausalLM"],
        "auto_map": {"AutoConfig": "config_molmo.MolmoConfig"},
        "model_type": "molmo",
        "vocab_size": text["vocab_size"],
        "embedding_size": text["vocab_size"],
        "hidden_size": text["hidden_size"],
        "intermediate_size": 2 * text["intermediate_size"],  # gate and up, fused
        "num_hidden_layers": text["num_hidden_layers"],
        "num_attention_heads": text["num_attention_heads"],
        "num_key_value_heads": text["num_key_value_heads"],
        "max_position_embeddings": text["max_position_embeddings"],
        "layer_norm_eps": 1e-6,
        "layer_norm_type": "rms",
        "attention_layer_norm": False,
        "norm_after": False,
        "qkv_bias": True,
        "rope_theta": 1000000.0,
        "weight_tying": False,
        "tie_word_embeddings": False,
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    write_json(dest / "config.json", config)
    write_json(
        dest / "preprocessor_config.json",
        {
            "max_crops": 1,
            "overlap_margins": [4, 4],
            "base_image_input_size": [336, 336],
            "image_patch_size": 14,
            "image_token_length_w": 12,
            "image_token_length_h": 12,
            "processor_class": "MolmoProcessor",
            "auto_map": {
                "AutoProcessor": "preprocessing_molmo.MolmoProcessor",
                "AutoImageProcessor": "image_preprocessing_molmo.MolmoImageProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# ---------------------------------------------------------------------------------------------
# Molmo2

_MOLMO2_FILES = (
    "configuration_molmo2.py",
    "processing_molmo2.py",
    "image_processing_molmo2.py",
    "video_processing_molmo2.py",
)

# Molmo2's added tokens: Qwen's turn tokens, then the image and frame tokens and the two
# placeholders, in the checkpoint's order.
_MOLMO2_SPECIALS = (
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
_MOLMO2_TEMPLATE = (
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


def build_molmo2(dest: Path) -> TinyCheckpoint:
    """Molmo2-8B (``Molmo2ForConditionalGeneration``: a SigLIP-style ViT whose 3rd and 9th
    layers from the top are joined, attention pooling of 2x2 patches per image token (3x3 per
    frame token), a Qwen3-style text model with QK norm) with STAND-IN config, processor,
    image and video processor classes and chat template. The real geometry is kept (378-pixel
    crops and frames of 14-pixel patches, 4-patch overlap margins, 729 positions), with tiny
    widths: the ViT 9 layers of 32, the adapter 32 wide, one text layer of 128. The image
    processor allows 2 tile crops (the real one more), so an image is 2 or 3 crops."""
    copy_standins("molmo2", dest, *_MOLMO2_FILES)
    (dest / "chat_template.jinja").write_text(_MOLMO2_TEMPLATE)
    tokenizer = build_tokenizer(
        dest,
        _MOLMO2_SPECIALS,
        chat_template=_MOLMO2_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _MOLMO2_SPECIALS)
    vit_width = 32
    write_json(
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
    write_json(
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
    write_json(
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
    write_json(
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
    # Generate sends the loader's prompt (real); chat goes through the stand-in template.
    # Not in CI: vLLM builds the full-size CLIP ViT-L/14 tower whatever the config says and
    # runs it on every crop; its test_cli_e2e case took 19-24 s (23-29 s with teardown) on the
    # shared 2-core machine.
    ("image", "molmo"): Proof(
        build_molmo,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
        in_ci=False,
    ),
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
