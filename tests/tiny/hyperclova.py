"""Tiny checkpoint of HyperCLOVA X SEED Vision (see tests/tiny/__init__.py), an older vLLM's
row (vLLM 0.28; see tests/tiny/__main__.py): the config class vLLM ships (HCXVisionConfig); the
processor and image processor classes (remote code) and the chat template are STAND-INS, so
the proof is of the engine path. Config-only: vLLM initialises random weights itself
(``load_format="dummy"``).
"""

from __future__ import annotations

import json
from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, SIGLIP, copy_standins

_HCX_FILES = ("processing_hyperclovax.py", "image_processing_hyperclovax.py")

# The turn tokens and the end-of-turn token of HyperCLOVA X, the image placeholder vLLM expands
# (``<|dummy3|>``) and its video placeholder.
_HCX_IMAGE, _HCX_VIDEO = "<|dummy3|>", "<|_unuse_missing_100270|>"

_HCX_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endofturn|>",
    _HCX_IMAGE,
    _HCX_VIDEO,
)

# STAND-IN chat template (the real one is in the checkpoint's tokenizer files, not known
# offline): ChatML turns, each image part as the image placeholder on a line of its own, its
# OCR text and lens keywords (empty in the loader's prompt) left out.
_HCX_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|dummy3|>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_hyperclovax_seed_vision(dest: Path) -> TinyCheckpoint:
    """HyperCLOVAX-SEED-Vision-Instruct-3B (``HCXVisionForCausalLM``). Its config class is the
    one vLLM 0.28 ships (``model_type: "hyperclovax_vlm"``); its processor and image processor
    classes are remote code: STAND-INS (tests/tiny/standins/hyperclovax). A two-layer SigLIP
    tower of width 64 on 56-pixel tiles (the second-to-last layer's output is used), a
    C-Abstractor pooling each tile's 4 x 4 patches to 2 x 2 queries, anyres tiling over grids of
    up to 4 tiles with unpadding and a newline per row (at most 24 image tokens per image), and a
    one-layer Llama text model, random weights (``load_format="dummy"``). The tokenizer is a
    generic one carrying HyperCLOVA X's turn and image tokens; its chat template is a STAND-IN
    (see ``_HCX_TEMPLATE``)."""

    copy_standins("hyperclovax", dest, *_HCX_FILES)
    tok = build_tokenizer(
        dest,
        _HCX_SPECIALS,
        chat_template=_HCX_TEMPLATE,
        eos_token="<|endofturn|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _HCX_SPECIALS)
    tile, queries, max_grids = SIGLIP["image_size"], 4, 4
    # [height, width] in pixels of every tile grid of at most max_grids tiles, 1 x 1 included.
    resolutions = [
        [rows * tile, cols * tile]
        for rows in range(1, max_grids + 1)
        for cols in range(1, max_grids + 1)
        if rows * cols <= max_grids
    ]
    config = {
        "architectures": ["HCXVisionForCausalLM"],
        "model_type": "hyperclovax_vlm",
        "text_config": {
            **TINY_TEXT,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|endofturn|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": False,
        },
        "vision_config": {"model_type": "siglip_vision_model", **SIGLIP},
        "use_nth_layer": -2,
        "anyres": True,
        "unpad": True,
        "max_num_grids": max_grids,
        "use_1x1_grid": True,
        "possible_resolutions": resolutions,
        "mm_projector_type": "cabstractor",
        "proj_pos_emb": True,
        "proj_prenorm": False,
        "num_queries_vis_abstractor": queries,
        "num_queries_vis_abstractor_image": queries,
        "num_queries_vis_abstractor_video_slow": queries,
        "num_queries_vis_abstractor_video_fast": 1,
        "first_last_frames_slow": False,
        "img_start_id": ids[_HCX_IMAGE],
        "image_token_id": ids[_HCX_IMAGE],
        "video_token_id": ids[_HCX_VIDEO],
        "decoder_max_length": TINY_TEXT["max_position_embeddings"],
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    preprocessor = {
        "image_processor_type": "HCXImageProcessor",
        "processor_class": "HCXProcessor",
        "grid_size": tile,
        "possible_resolutions": resolutions,
        "num_queries_vis_abstractor": queries,
        "unpad": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "auto_map": {
            "AutoProcessor": "processing_hyperclovax.HCXProcessor",
            "AutoImageProcessor": "image_processing_hyperclovax.HCXImageProcessor",
        },
    }
    (dest / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


PROOFS: dict[tuple[str, str], Proof] = {
    # The config class is vLLM 0.28's own; the prompt comes from the stand-in template.
    ("image", "hyperclovax_seed_vision"): Proof(
        build_hyperclovax_seed_vision,
        env="0.28",
        standin="processor and image processor classes, chat template",
        real_prompt=False,
    ),
}
