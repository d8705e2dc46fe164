"""Tiny checkpoint of R-4B (``RForConditionalGeneration``: LLaVA-OneVision's layout with a
projector of its own), whose config and processor classes are remote code: STAND-IN RConfig
and RProcessor classes (tests/tiny/standins/rvl/) written from what vLLM reads and calls,
over transformers' LLaVA-OneVision image processor. It proves vLLM's processor path,
placeholder expansion and model on the engine, not the original classes or the real chat
template.
"""

from __future__ import annotations

import json
import shutil
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
from tests.tiny import Proof

_STANDINS = Path(__file__).resolve().parent / "standins" / "rvl"

# Qwen3's turn tokens, its reasoning block (R-4B's thinking mode), and the image placeholder
# vLLM's R model expands.
_RVL_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<image>",
)
# STAND-IN chat template (the real one is in the checkpoint's files, not known offline): ChatML
# turns, each image part as <image> and a newline where the content puts it.
_RVL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_rvl(dest: Path) -> TinyCheckpoint:
    """R-4B (``RForConditionalGeneration``): a one-layer SigLIP tower of width 64 and a
    one-layer Qwen3 text model (the real ones: a SigLIP so400m tower and Qwen3-4B), random
    weights (``load_format="dummy"``).

    The geometry is the real one shrunk: 56-pixel tiles of 14-pixel patches (4 x 4 features
    per tile; the real 384-pixel tiles have 27 x 27), any-resolution grids of 1 to 3 tiles a
    side. The tokenizer is a generic one (byte-level BPE) carrying Qwen3's tokens and
    ``<image>``; its chat template is a STAND-IN (see ``_RVL_TEMPLATE``)."""
    tf = transformers_module()
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("configuration_r.py", "processing_r.py"):
        shutil.copy(_STANDINS / name, dest / name)
    tok = build_tokenizer(
        dest,
        _RVL_SPECIALS,
        chat_template=_RVL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _RVL_SPECIALS)
    tile, patch = 56, 14
    pinpoints = [[tile * h, tile * w] for h in range(1, 4) for w in range(1, 4)]
    config: dict[str, Any] = {
        "architectures": ["RForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_r.RConfig"},
        "model_type": "rvl",
        "image_token_index": ids["<image>"],
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "full",
        "image_grid_pinpoints": pinpoints,
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
    settings["processor_class"] = "RProcessor"
    settings["auto_map"] = {"AutoProcessor": "processing_r.RProcessor"}
    preprocessor.write_text(json.dumps(settings, indent=2) + "\n")
    (dest / "chat_template.jinja").write_text(_RVL_TEMPLATE)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


# Both methods' prompts come from the stand-in template (the loader renders the processor's).
# The image processor is transformers' LLaVA-OneVision class, an assumption: the real
# checkpoint's image processor is not known offline.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "rvl"): Proof(
        build_rvl,
        standin="config and processor classes, image processor, chat template",
        real_prompt=False,
    ),
}
