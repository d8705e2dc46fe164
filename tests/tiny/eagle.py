"""Tiny checkpoint of Eagle 2.5 (see tests/tiny/__init__.py), whose config class is remote
code: a STAND-IN (tests/tiny/standins/eagle2_5/), copied into the folder and named in
config.json's ``auto_map`` as the Hub's is, loaded with ``--trust-remote-code``. Weights are
random (vLLM's ``load_format="dummy"``).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import CHATML_STANDIN, DUMMY_ENGINE, copy_standins, write_json

_EAGLE_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
    "<quad>",
    "</quad>",
    "<ref>",
    "</ref>",
    "<box>",
    "</box>",
]


def build_eagle2_5(dest: Path) -> TinyCheckpoint:
    """Eagle2.5-8B (``Eagle2_5_VLForConditionalGeneration``): a STAND-IN config class
    (tests/tiny/standins/eagle2_5/), SigLIP tower and Qwen2 text model. vLLM builds the
    processor itself (InternVL tiling from the config's image_size, min/max_dynamic_patch,
    use_thumbnail; <img><IMG_CONTEXT>...</img>): 56-pixel tiles of 7-pixel patches,
    pixel-shuffled by 0.5 -> 16 tokens per tile. config.json also carries the
    ``min_dynamic_tiles``/``max_dynamic_tiles`` names the Hub's config uses for the same
    bounds. The chat template is a STAND-IN (ChatML, the Qwen2 turns of Eagle's
    conversation template)."""
    tok = build_tokenizer(
        dest,
        _EAGLE_SPECIALS,
        chat_template=CHATML_STANDIN,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>"])
    copy_standins("eagle2_5", dest, "configuration_eagle2_5_vl.py")
    size, patch = 56, 7
    write_json(
        dest / "config.json",
        {
            "architectures": ["Eagle2_5_VLForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_eagle2_5_vl.Eagle2_5_VLConfig"},
            "model_type": "eagle_2_5_vl",
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": size,
                "patch_size": patch,
            },
            "text_config": {
                **TINY_TEXT,
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                "vocab_size": padded_vocab_size(tok),
                "bos_token_id": ids["<|endoftext|>"],
                "eos_token_id": ids["<|im_end|>"],
                "tie_word_embeddings": False,
            },
            "select_layer": -1,
            "force_image_size": size,
            "downsample_ratio": 0.5,
            "dynamic_image_size": True,
            "use_thumbnail": True,
            "min_dynamic_tiles": 1,
            "max_dynamic_tiles": 6,
            "min_dynamic_patch": 1,
            "max_dynamic_patch": 6,
            "image_token_index": ids["<IMG_CONTEXT>"],
            "use_pixel_shuffle": True,
            "_attn_implementation": "eager",
        },
    )
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "eagle2_5"): Proof(
        build_eagle2_5, standin="config class, chat template", real_prompt=False
    ),
}
