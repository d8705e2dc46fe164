"""The tiny checkpoint of a model built on LLaVA-OneVision's layout (a SigLIP tower, a Qwen3
text model, any-resolution tiles) whose config and processor classes are remote code: the
STAND-IN classes of its folder in tests/tiny/standins/, over transformers' LLaVA-OneVision
image processor. Bee (tests/tiny/bee.py) and R-4B (tests/tiny/rvl.py) differ only in their
classes' names, their largest grid and Bee's ``vision_aspect_ratio``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    token_ids,
    transformers_module,
)

STANDINS = Path(__file__).resolve().parent / "standins"

# Qwen3's turn tokens, its reasoning block, and the image placeholder vLLM expands.
SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<image>",
)
# STAND-IN chat template (the real ones are in the checkpoints' files, not known offline):
# ChatML turns, each image part as <image> and a newline where the content puts it.
TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_onevision_standin(
    dest: Path,
    *,
    standins: str,
    architecture: str,
    model_type: str,
    config_class: str,
    processor_class: str,
    max_tiles: int,
    extra_config: Mapping[str, Any] | None = None,
) -> TinyCheckpoint:
    """A one-layer SigLIP tower of width 64 and a one-layer Qwen3 text model, random weights
    (``load_format="dummy"``), 56-pixel tiles of 14-pixel patches (4 x 4 features per tile),
    any-resolution grids of 1 to ``max_tiles`` tiles a side; a generic tokenizer (byte-level
    BPE) carrying Qwen3's tokens and ``<image>``, and the STAND-IN chat template.

    ``standins``: the folder of tests/tiny/standins/ whose two files (``configuration_*.py``
    with ``config_class``, ``processing_*.py`` with ``processor_class``, named
    ``module.Class``) the checkpoint carries; ``extra_config``: the config's own fields, after
    the grid."""
    tf = transformers_module()
    dest.mkdir(parents=True, exist_ok=True)
    for name in (config_class, processor_class):
        module = name.split(".")[0] + ".py"
        shutil.copy(STANDINS / standins / module, dest / module)
    tok = build_tokenizer(
        dest,
        SPECIALS,
        chat_template=TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, SPECIALS)
    tile, patch = 56, 14
    sides = range(1, max_tiles + 1)
    pinpoints = [[tile * h, tile * w] for h in sides for w in sides]
    config: dict[str, Any] = {
        "architectures": [architecture],
        "auto_map": {"AutoConfig": config_class},
        "model_type": model_type,
        "image_token_index": ids["<image>"],
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "full",
        "image_grid_pinpoints": pinpoints,
        **(extra_config or {}),
        "projector_hidden_act": "gelu",
        "multimodal_projector_bias": True,
        "tie_word_embeddings": False,
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": tile,
            "patch_size": patch,
            "vision_use_head": False,
        },
        "text_config": {
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "tie_word_embeddings": False,
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    image_processor = tf.LlavaOnevisionImageProcessor(
        size={"height": tile, "width": tile},
        crop_size={"height": tile, "width": tile},
        image_grid_pinpoints=pinpoints,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    image_processor.save_pretrained(str(dest))
    preprocessor = dest / "preprocessor_config.json"
    settings = json.loads(preprocessor.read_text())
    settings["processor_class"] = processor_class.split(".")[1]
    settings["auto_map"] = {"AutoProcessor": processor_class}
    preprocessor.write_text(json.dumps(settings, indent=2) + "\n")
    (dest / "chat_template.jinja").write_text(TEMPLATE)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)
