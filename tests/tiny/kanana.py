"""Tiny checkpoint of Kanana-V (``KananaVForConditionalGeneration``: a Qwen2-VL vision
transformer without its patch merger, a RegNet C-Abstractor, a Llama text model), whose
config, processor and image processor classes are remote code: STAND-IN KananaVConfig,
KananaVProcessor and KananaVImageProcessor classes (tests/tiny/standins/kanana_v/) written from
what vLLM reads and calls. It proves vLLM's processor path, placeholder expansion and model
on the engine, not the original classes or the real chat template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import copy_standins, write_json

_FILES = ("configuration_kanana_v.py", "processing_kanana_v.py", "image_processing_kanana_v.py")

# Llama 3's turn tokens (Kanana 1.5's text model is a Llama), the ``<image>`` placeholder the
# loader's prompt carries, and the image token vLLM puts in its place: the id right after the
# text config's eos_token_id (vLLM finds it by id; its name here is a STAND-IN).
_KANANA_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|kanana_image|>",
    "<image>",
)

# STAND-IN chat template (the real one is in the checkpoint's tokenizer files, not known
# offline): Llama 3's turns, each image part as <image> and a newline.
_KANANA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def build_kanana_v(dest: Path) -> TinyCheckpoint:
    """Kanana-1.5-V-3B (``KananaVForConditionalGeneration``): a one-layer Qwen2-VL vision
    transformer of width 64 (14-pixel patches, merged 2 x 2, over 2 frames per patch), a
    C-Abstractor with one RegNet block per stage and an 8 x 8 grid of learnt positions, and a
    one-layer Llama text model, random weights (``load_format="dummy"``). Images are resized to
    multiples of 28 pixels within 4 to 16 merged patches (at most 16 image tokens). The
    tokenizer is a generic one (byte-level BPE) carrying Llama 3's turn tokens, ``<image>`` and
    the image token at eos_token_id + 1; its chat template is a STAND-IN (see
    ``_KANANA_TEMPLATE``)."""
    copy_standins("kanana_v", dest, *_FILES)
    tok = build_tokenizer(
        dest,
        _KANANA_SPECIALS,
        chat_template=_KANANA_TEMPLATE,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
    )
    ids = token_ids(tok, _KANANA_SPECIALS)
    if ids["<|kanana_image|>"] != ids["<|eot_id|>"] + 1:
        raise ValueError("the image token must follow eos_token_id")
    patch, merge, width = 14, 2, 64
    config: dict[str, Any] = {
        "architectures": ["KananaVForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_kanana_v.KananaVConfig"},
        "model_type": "kanana-1.5-v",
        "vision_config": {
            "depth": 1,
            "embed_dim": width,
            "hidden_size": TINY_TEXT["hidden_size"],
            "num_heads": 2,
            "mlp_ratio": 2,
            "in_channels": 3,
            "patch_size": patch,
            "spatial_merge_size": merge,
            "temporal_patch_size": 2,
        },
        "projector_config": {
            "merge_size": merge,
            "pos_emb": True,
            "pos_emb_size": 64,
            "encoder_hidden_size": width,
            "hidden_size": width,
            "output_hidden_size": TINY_TEXT["hidden_size"],
            "depth": 1,
            "mlp_depth": 2,
            "feature_layer_index": -1,
        },
        "text_config": {
            **TINY_TEXT,
            "model_type": "llama",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|begin_of_text|>"],
            "eos_token_id": ids["<|eot_id|>"],
            "tie_word_embeddings": False,
        },
    }
    write_json(dest / "config.json", config)
    merged = patch * merge
    write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "KananaVImageProcessor",
            "min_pixels": 4 * merged * merged,
            "max_pixels": 16 * merged * merged,
            "patch_size": patch,
            "temporal_patch_size": 2,
            "merge_size": merge,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "KananaVProcessor",
            "auto_map": {
                "AutoProcessor": "processing_kanana_v.KananaVProcessor",
                "AutoImageProcessor": "image_processing_kanana_v.KananaVImageProcessor",
            },
        },
    )
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


# Both methods' prompts come from the stand-in template (the loader renders the tokenizer's).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "kanana_v"): Proof(
        build_kanana_v,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
    ),
}
