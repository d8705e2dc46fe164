"""Tiny checkpoints of single-image rows whose config, processor or tokenizer classes are
remote code, with STAND-INS written by this project (tests/tiny/standins/<model>/, or a
tokenizer built here) in place of the model authors' classes. A builder copies a stand-in
module next to config.json, whose ``auto_map`` names it, as the Hub repository does, and the
test runs it with ``--trust-remote-code`` as a user would.

The tokenizers are trained locally (byte-level BPE) with each model's real special tokens.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, token_ids
from tests.tiny import Proof
from tests.tiny.audio import _GLM_SPECIALS
from tests.tiny.image import _text

_STANDINS = Path(__file__).resolve().parent / "standins"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# dots.ocr

# The dots.ocr tokenizer's added tokens (Qwen2's, then its own turn and image tokens).
_DOTS_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|video_pad|>",
    "<|imgpad|>",
    "<|img|>",
    "<|endofimg|>",
    "<|user|>",
    "<|endofuser|>",
    "<|assistant|>",
    "<|endofassistant|>",
)


def build_dots_ocr(dest: Path) -> TinyCheckpoint:
    """dots.ocr (``DotsOCRForCausalLM``: a NaViT-style tower with 2x2 patch merging, Qwen2
    text). The config class named in auto_map is a STAND-IN (tests/tiny/standins/dots_ocr/:
    vLLM's own DotsOCRConfig, which vLLM does not register); the Hub's auto_map also names a
    processor class, which vLLM does not use: it builds transformers' Qwen2VLProcessor over
    the checkpoint's Qwen2-VL image processor (14-pixel patches, one per frame)."""
    import transformers

    tf: Any = transformers
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(_STANDINS / "dots_ocr" / "configuration_dots.py", dest)
    tokenizer = build_tokenizer(
        dest,
        _DOTS_SPECIALS,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _DOTS_SPECIALS)
    text = _text(
        tokenizer,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"],
        rope_theta=1000000.0,
        tie_word_embeddings=False,
    )
    patch = 14
    config = {
        "architectures": ["DotsOCRForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_dots.DotsOCRConfig"},
        "model_type": "dots_ocr",
        **text,
        "image_token_id": ids["<|imgpad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_config": {
            "embed_dim": 64,
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 1,
            "rms_norm_eps": 1e-5,
            "use_bias": False,
            "post_norm": True,
            "attn_implementation": "sdpa",
        },
    }
    _write_json(dest / "config.json", config)
    # At most 16 merged 28x28 patches per image: a few placeholder tokens each.
    processor = tf.Qwen2VLImageProcessor(
        size={"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28},
        patch_size=patch,
        temporal_patch_size=1,
        merge_size=2,
    )
    processor.save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# ---------------------------------------------------------------------------------------------
# GLM-4V


# GLM-4's special tokens, in id order from 151329 (the real vocabulary's first special id): the
# GLM-4 family's list, up to its audio tokens.
_GLM4_SPECIALS = _GLM_SPECIALS[: _GLM_SPECIALS.index("<|begin_of_audio|>")]


def _glm4_tokenizer(dest: Path) -> dict[str, int]:
    """A STAND-IN for GLM-4's remote tokenizer (ChatGLM4Tokenizer, tiktoken): a locally trained
    byte-level BPE whose vocabulary is padded so that the special tokens keep their real ids
    (151329 on), which the loader's stop ids name; like the real one, it starts each encoded
    text with ``[gMASK]<sop>``. Returns the special tokens' ids."""
    from tokenizers.processors import TemplateProcessing

    from tests.tiny.standin import _place_tokens

    placed = {151329 + i: token for i, token in enumerate(_GLM4_SPECIALS)}
    ids = {token: i for i, token in placed.items()}
    tokenizer = _place_tokens(build_tokenizer(dest, []), placed, dest)
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="[gMASK] <sop> $A",
        special_tokens=[(t, ids[t]) for t in ("[gMASK]", "<sop>")],
    )
    tokenizer.eos_token = tokenizer.pad_token = "<|endoftext|>"
    tokenizer.save_pretrained(str(dest))
    return ids


def build_glm4v(dest: Path) -> TinyCheckpoint:
    """GLM-4V-9B (``ChatGLMModel`` with an EVA2-CLIP tower, run as ``GLM4VForCausalLM``): vLLM
    ships the config class (ChatGLMConfig, model type "chatglm") and the image processor; the
    tokenizer is a STAND-IN (:func:`_glm4_tokenizer`) for the remote ChatGLM4Tokenizer. The
    checkpoint carries no chat template (the real one is the remote tokenizer's)."""
    ids = _glm4_tokenizer(dest)
    patch, size = 14, 56
    vision = {
        "dropout_prob": 0.0,
        "hidden_act": "gelu",
        "in_channels": 3,
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "patch_size": patch,
        "num_heads": 2,
        "intermediate_size": 128,
        "layer_norm_eps": 1e-06,
        "num_positions": (size // patch) ** 2 + 1,
        "image_size": size,
        "scaling_factor": 8,
    }
    config = {
        "model_type": "chatglm",
        "architectures": ["ChatGLMModel"],
        "vision_config": vision,
        "add_bias_linear": False,
        "add_qkv_bias": True,
        "apply_query_key_layer_scaling": True,
        "apply_residual_connection_post_layernorm": False,
        "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True,
        "bias_dropout_fusion": True,
        "ffn_hidden_size": TINY_TEXT["intermediate_size"],
        "fp32_residual_connection": False,
        "hidden_dropout": 0.0,
        "hidden_size": TINY_TEXT["hidden_size"],
        "kv_channels": TINY_TEXT["head_dim"],
        "layernorm_epsilon": 1.5625e-07,
        "multi_query_attention": True,
        "multi_query_group_num": 1,
        "num_attention_heads": TINY_TEXT["num_attention_heads"],
        "num_layers": 1,
        "original_rope": True,
        "padded_vocab_size": 151552,  # the real size: the special tokens keep their ids
        "post_layer_norm": True,
        "rmsnorm": True,
        "seq_length": 2048,
        "tie_word_embeddings": False,
        "eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "boi_token_id": ids["<|begin_of_image|>"],
        "eoi_token_id": ids["<|end_of_image|>"],
    }
    _write_json(dest / "config.json", config)
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


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
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("config_molmo.py", "preprocessing_molmo.py", "image_preprocessing_molmo.py"):
        shutil.copy(_STANDINS / "molmo" / name, dest)
    tokenizer = build_tokenizer(
        dest,
        _MOLMO_SPECIALS,
        chat_template=_MOLMO_STANDIN,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _MOLMO_SPECIALS)
    text = _text(tokenizer)
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
    _write_json(dest / "config.json", config)
    _write_json(
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


PROOFS: dict[tuple[str, str], Proof] = {
    # The prompts are the loaders' hand-written ones (vLLM's example), so real; these
    # checkpoints carry no chat template, so the test runs generate only.
    ("image", "dots_ocr"): Proof(build_dots_ocr, standin="config class (vLLM's)"),
    # The stand-in tokenizer encodes the loader's prompt with the real special ids and prefix.
    ("image", "glm4v"): Proof(build_glm4v, standin="tokenizer"),
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
}
