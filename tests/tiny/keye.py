"""Tiny checkpoints of Kuaishou's Keye-VL and Keye-VL-1.5 (see tests/tiny/__init__.py), whose
config and processor classes are remote code, with STAND-IN classes (tests/tiny/standins/keye_vl/
and keye_vl1_5/) written by this project from what vLLM 0.32 reads and calls. Each checkpoint
carries its stand-in files and names them in ``auto_map``, as the model's Hub repository does,
so the engine and the processor load them with ``--trust-remote-code``.

Keye-VL-1.5's stand-ins are written from what vLLM 0.32's keye_vl1_5.py and keye.py read and
call: the config (Qwen3 text fields and the SigLIP vision config with its merge size), the
processor (pad, frame and fast-pathway tokens) and its image processor (patches, per-image
grids, per-frame video grids and frame counts). vLLM expands the ``<|image_pad|>`` and
``<|video_pad|>`` placeholders itself from those grids, so the rows prove vLLM's processor path,
placeholder expansion and model, not the original classes.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, copy_standins, write_json

# ---------------------------------------------------------------------------------------------
# Keye-VL-8B-Preview

_KEYE_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# STAND-IN chat template (the checkpoint's own is in its Hub files): ChatML turns, each image
# or video part as the vision tokens vLLM's Keye-VL expands, then the text parts.
_KEYE_STANDIN = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_keye_vl(dest: Path) -> TinyCheckpoint:
    """Keye-VL-8B-Preview (``KeyeForConditionalGeneration``: a SigLIP tower with 2x2 patch
    merging, Qwen3 text, M-RoPE) with STAND-IN KeyeConfig, KeyeProcessor and image processor
    classes and chat template (tests/tiny/standins/). The tokenizer is trained locally, with
    the real special tokens."""
    copy_standins(
        "keye_vl",
        dest,
        "configuration_keye.py",
        "image_processing_keye.py",
        "processing_keye.py",
    )
    template = _KEYE_STANDIN
    (dest / "chat_template.jinja").write_text(template)
    tok = build_tokenizer(
        dest,
        _KEYE_SPECIALS,
        chat_template=template,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _KEYE_SPECIALS)
    patch = 14
    config = {
        "architectures": ["KeyeForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_keye.KeyeConfig"},
        "model_type": "Keye",
        **TINY_TEXT,
        "vocab_size": padded_vocab_size(tok),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": False,
        "vision_config": {
            "auto_map": {"AutoConfig": "configuration_keye.KeyeVisionConfig"},
            "model_type": "siglip_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 4 * patch,
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "tokens_per_second": 2,
        },
        # mrope_section halves sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
    }
    write_json(dest / "config.json", config)
    # The real preprocessor settings with smaller images: at most 16 merged 28x28 patches.
    merged = 2 * patch
    write_json(
        dest / "preprocessor_config.json",
        {
            "min_pixels": 4 * merged * merged,
            "max_pixels": 16 * merged * merged,
            "patch_size": patch,
            "temporal_patch_size": 1,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "KeyeProcessor",
            "auto_map": {
                "AutoProcessor": "processing_keye.KeyeProcessor",
                "AutoImageProcessor": "image_processing_keye.SiglipImageProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# ---------------------------------------------------------------------------------------------
# Keye-VL-1.5

_KEYE_VL1_5_FILES = (
    "configuration_keye_vl1_5.py",
    "image_processing_keye_vl1_5.py",
    "processing_keye_vl1_5.py",
)

# Qwen3's turn tokens and the vision tokens of mmrun's Keye prompts, then the stand-in
# processor's frame and fast-pathway tokens (vLLM tokenises them into a video's placeholders).
_KEYE_VL1_5_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|frame|>",
    "<|fast_start|>",
    "<|fast_end|>",
)

# STAND-IN chat template (the checkpoint's own is in its Hub files): ChatML turns in which an
# image or video part becomes its vision-bracketed pad token and a text part its text.
_KEYE_VL1_5_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' ~ message['role'] ~ '\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'video' -%}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)

_PATCH = 14


def build_keye_vl1_5(dest: Path) -> TinyCheckpoint:
    """Keye-VL-1.5 (``KeyeVL1_5ForConditionalGeneration``: a SigLIP tower with 2D RoPE, a
    projector merging 2x2 patches, Qwen3 text, M-RoPE) with STAND-IN config, processor and
    image processor classes and chat template. The real geometry shrunk: 14-pixel patches
    merged 2x2, at most 16 merged patches per image or frame. The tokenizer is trained
    locally with the real tokens of mmrun's Keye prompts."""
    copy_standins("keye_vl1_5", dest, *_KEYE_VL1_5_FILES)
    (dest / "chat_template.jinja").write_text(_KEYE_VL1_5_TEMPLATE)
    tok = build_tokenizer(
        dest,
        _KEYE_VL1_5_SPECIALS,
        chat_template=_KEYE_VL1_5_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _KEYE_VL1_5_SPECIALS)
    config = {
        "architectures": ["KeyeVL1_5ForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_keye_vl1_5.KeyeVL1_5Config"},
        "model_type": "KeyeVL1_5",
        # Qwen3-8B's text model shrunk (4096 hidden, 36 layers, 32 heads, 8 KV heads of 128).
        **TINY_TEXT,
        "vocab_size": padded_vocab_size(tok),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": False,
        # M-RoPE sections sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
        # The SigLIP tower shrunk (1152 hidden, 27 layers, 16 heads): 14-pixel patches, a 4x4
        # grid of position embeddings that vLLM interpolates to each image's grid.
        "vision_config": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "image_size": 4 * _PATCH,
            "patch_size": _PATCH,
            "hidden_act": "gelu_pytorch_tanh",
            "layer_norm_eps": 1e-6,
            "spatial_merge_size": 2,
        },
    }
    write_json(dest / "config.json", config)
    merged = 2 * _PATCH
    write_json(
        dest / "preprocessor_config.json",
        {
            "min_pixels": 4 * merged * merged,
            "max_pixels": 16 * merged * merged,
            "patch_size": _PATCH,
            "temporal_patch_size": 1,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "KeyeVL1_5Processor",
            "auto_map": {
                "AutoProcessor": "processing_keye_vl1_5.KeyeVL1_5Processor",
                "AutoImageProcessor": "image_processing_keye_vl1_5.KeyeVL1_5ImageProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "keye_vl"): Proof(
        build_keye_vl,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
    ),
    # The video loader's prompt is hand-written (no chat template); tests/e2e/test_video_e2e.py.
    ("video", "keye_vl"): Proof(
        build_keye_vl, standin="config, processor and image processor classes"
    ),
    # The image loader renders the processor's chat template: the stand-in one, for generate
    # and chat.
    ("image", "keye_vl1_5"): Proof(
        build_keye_vl1_5,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
    ),
    # The video loader's prompt is hand-written (vLLM's example); tests/e2e/test_video_e2e.py.
    ("video", "keye_vl1_5"): Proof(
        build_keye_vl1_5, standin="config, processor and image processor classes"
    ),
}
