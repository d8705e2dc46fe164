"""Tiny checkpoints of Ovis2 and Ovis2.5 (see tests/tiny/__init__.py). Ovis2's config and
processor are vLLM's own; Ovis2.5's config classes are remote code, with STAND-INS
(tests/tiny/standins/ovis2_5/) written by this project from the fields vLLM reads. They prove
vLLM's own processor, placeholder expansion and model path; they do not prove the original
classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, copy_standins, place_tokens

# transformers' convert_ovis2_weights_to_hf.py chat template (the converted checkpoint's; the
# original Ovis2 tokenizer's Qwen2.5 template renders string contents the same way).
_OVIS2_TEMPLATE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image>\n' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{'<|im_end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)


def build_ovis(dest: Path) -> TinyCheckpoint:
    """Ovis2-1B in its original layout (``Ovis``, model_type "ovis"): vLLM ships the config
    (OvisConfig) and the processor (OvisProcessor), so nothing here is a stand-in class. Data
    that is: the image processor (SiglipImageProcessor resizing to the given size: OvisProcessor
    resizes, pads and partitions itself) and the template (from transformers' conversion
    script). vLLM hard-codes ``<|image_pad|>`` = 151655 for a Qwen2 text model: the tokenizer
    is padded to put it there (151680 embedding rows of width 128)."""
    import transformers

    tf: Any = transformers
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_OVIS2_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok = place_tokens(tok, {151655: "<|image_pad|>"}, dest)
    size, patch = 56, 14
    config = {
        "architectures": ["Ovis"],
        "model_type": "ovis",
        "hidden_size": TINY_TEXT["hidden_size"],
        "multimodal_max_length": 2048,
        "llm_config": {
            **TINY_TEXT,
            "model_type": "qwen2",
            "architectures": ["Qwen2ForCausalLM"],
            "vocab_size": 151680,
            "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
        },
        "visual_tokenizer_config": {
            "model_type": "aimv2_visual_tokenizer",
            "vocab_size": 69,  # 64 visual words + the 5 indicator ids
            "tokenize_function": "softmax",
            "tau": 1.0,
            "depths": [1],
            "drop_cls_token": False,
            "hidden_stride": 2,
            "backbone_config": {
                "model_type": "aimv2",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "image_size": size,
                "patch_size": patch,
                "num_channels": 3,
                "qkv_bias": False,
                "mlp_bias": False,
                "rms_norm_eps": 1e-5,
            },
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tf.SiglipImageProcessor(size={"height": size, "width": size}).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# Ovis2.5's tokens around the ids vLLM hard-codes (ovis2_5.py: IMAGE_PAD_TOKEN_ID = 151655,
# INDICATOR_IDS = 151672-151675, the indicators being the image/video start and end tokens).
# 151655 is Qwen's <|image_pad|>; the order 151669-151675 follows the order in which vLLM's
# Ovis2_5Processor lists the tokens it needs: an ASSUMPTION (the real tokenizer is not here).
_OVIS2_5_TOKENS = {
    151655: "<|image_pad|>",
    151669: "<image>",
    151670: "<video>",
    151671: "<ovis_visual_atom>",
    151672: "<ovis_image_start>",
    151673: "<ovis_image_end>",
    151674: "<ovis_video_start>",
    151675: "<ovis_video_end>",
}

# STAND-IN chat template (the real one is in the checkpoint's tokenizer files, not known
# offline): plain ChatML, string or part contents, each image part as <image> and a newline.
_OVIS2_5_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_ovis2_5(dest: Path) -> TinyCheckpoint:
    """Ovis2.5-2B (``Ovis2_5``): STAND-IN config classes (Ovis2_5Config, Siglip2NavitConfig);
    vLLM's own Ovis2_5Processor (smart resize to multiples of patch x stride, then the
    checkpoint's image processor) and model. 64-pixel patches keep the tower's patch count
    small: vLLM profiles with a 1792 x 1792 image (784 patches here, 12544 with the real 16)."""
    import transformers

    tf: Any = transformers
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_OVIS2_5_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok = place_tokens(tok, _OVIS2_5_TOKENS, dest)
    copy_standins("ovis2_5", dest, "configuration_ovis2_5.py")
    patch = 64
    config = {
        "architectures": ["Ovis2_5"],
        "auto_map": {"AutoConfig": "configuration_ovis2_5.Ovis2_5Config"},
        "model_type": "ovis2_5",
        "hidden_size": TINY_TEXT["hidden_size"],
        "visual_vocab_size": 68,  # 64 visual words + the 4 indicators
        "llm_config": {
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": 151680,
            "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
        },
        "vit_config": {
            "model_type": "siglip2_navit",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "image_size": 512,
            "patch_size": patch,
            "temporal_patch_size": 1,
            "hidden_stride": 2,
            "num_patches": 64,  # an 8 x 8 position table, interpolated to each grid
            "preserve_original_pe": True,
            "use_rope": True,
            "window_size": 4 * patch,
            "fullatt_block_indexes": "0",
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tf.SiglipImageProcessor(size={"height": 512, "width": 512}).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**DUMMY_ENGINE, "max_num_batched_tokens": 2048})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The template is transformers' conversion script's (the converted checkpoint's), the
    # image processor class an assumption: neither is read from the real checkpoint.
    ("image", "ovis"): Proof(
        build_ovis, standin="chat template, image processor", real_prompt=False
    ),
    ("image", "ovis2_5"): Proof(
        build_ovis2_5,
        standin="config classes, chat template, image processor, token order",
        real_prompt=False,
    ),
    ("video", "ovis2_5"): Proof(
        build_ovis2_5,
        standin="config classes, chat template, image processor, token order",
        real_prompt=False,
    ),
}
