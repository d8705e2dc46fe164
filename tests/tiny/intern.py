"""Tiny checkpoints of the InternVL family (see tests/tiny/__init__.py): Intern-S1,
InternVL2 / InternVL3, H2OVL-Mississippi, NVLM-D, and Intern-S1-Pro.

InternVL, H2OVL and NVLM-D have remote config classes: one STAND-IN module
(tests/tiny/standins/internvl/) written by this project from the fields vLLM reads, so their
checkpoints prove vLLM's own processor, placeholder expansion and model path, not the original
class. Intern-S1 needs no stand-in class (vLLM reads transformers' own InternVL classes);
its tokenizer and chat template are stand-ins.

Intern-S1-Pro's config and processor classes are remote code, with STAND-IN classes
(tests/tiny/standins/interns1_pro/) written by this project from what vLLM 0.32's
interns1_pro.py reads and calls: the config (a Qwen3-MoE style text model with Fourier position
encoding and grouped routing, a Qwen3-VL style vision tower), the processor and the video
processor (Qwen3-VL's under the checkpoint's names: vLLM runs Qwen3-VL's multimodal processor
over them). vLLM expands ``<|image_pad|>`` and ``<|video_pad|>`` itself from the processors'
grids. vLLM 0.32 cannot build the model itself (see the row's UNPROVEN reason below):
tests/e2e/test_unproven_rows_e2e.py runs this checkpoint through vLLM's processor and holds that
failure; when a vLLM release builds the model, register it as the image and video rows' proof
(stand-in config, processor and video processor classes and chat template; real_prompt=False,
as both loaders render the chat template).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from mmrun.tiny.qwen_vl import _QWEN2_VL_TEMPLATE, _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny._common import CHATML_STANDIN, DUMMY_ENGINE, copy_standins, write_json
from tests.tiny.qwen import QWEN3_VISION

# A one-layer InternViT tower (56-pixel images, 7-pixel patches): the vision config of the
# InternVL-style checkpoints.
INTERN_VIT: dict[str, Any] = {
    "architectures": ["InternVisionModel"],
    "model_type": "intern_vit_6b",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "image_size": 56,
    "patch_size": 7,
    "num_channels": 3,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-6,
    "norm_type": "layer_norm",
    "qk_normalization": False,
    "qkv_bias": True,
    "initializer_factor": 1.0,
}


# ---------------------------------------------------------------------------------------------
# Intern-S1

# STAND-IN chat template for Intern-S1 (its real template lives in the remote
# InternS1Tokenizer's files, not available offline): plain ChatML, string or part contents.
_INTERNS1_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_interns1(dest: Path) -> TinyCheckpoint:
    """Intern-S1 (``InternS1ForConditionalGeneration``): vLLM's InternS1 reads only
    transformers' own InternVLConfig / InternVLVisionConfig fields and uses transformers'
    InternVLProcessor (GotOcr2 tiling) and InternVLVideoProcessor, so no class is a stand-in;
    the tokenizer is a generic one with the InternVL image tokens and the chat template is a
    STAND-IN. Text model: a tiny dense Qwen3 (the real one is Qwen3-MoE)."""
    import transformers

    tf: Any = transformers
    named: dict[str, Any] = {
        "start_image_token": "<img>",
        "end_image_token": "</img>",
        "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>",
    }
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_INTERNS1_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>"])
    size, patch = 56, 14
    config = tf.InternVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": [size, size],
            "patch_size": [patch, patch],
        },
        text_config={
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
        },
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=(size // patch) ** 2 // 4,
        downsample_ratio=0.5,
    )
    config.architectures = ["InternS1ForConditionalGeneration"]
    config.save_pretrained(str(dest))
    tf.InternVLProcessor(
        image_processor=tf.GotOcr2ImageProcessor(
            size={"height": size, "width": size}, crop_to_patches=True, max_patches=2
        ),
        tokenizer=tok,
        video_processor=tf.InternVLVideoProcessor(size={"height": size, "width": size}),
        image_seq_length=(size // patch) ** 2 // 4,
        chat_template=_INTERNS1_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# ---------------------------------------------------------------------------------------------
# InternVL2, InternVL3, H2OVL-Mississippi, NVLM-D

_H2OVL_STANDIN = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "<|prompt|>{{ message['content'] }}{{ eos_token }}{% elif message['role'] == 'assistant' %}"
    "<|answer|>{{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|answer|>{% endif %}"
)

_INTERNVL_KINDS: dict[str, dict[str, Any]] = {
    "internvl_chat": {
        "architecture": "InternVLChatModel",
        "class": "InternVLChatConfig",
        "text": ("qwen2", "Qwen2ForCausalLM"),
        "specials": [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<|end|>",
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
        ],
        "template": CHATML_STANDIN,
        "tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    },
    "h2ovl_chat": {
        "architecture": "H2OVLChatModel",
        "class": "H2OVLChatConfig",
        "text": ("llama", "LlamaForCausalLM"),
        "specials": [
            "<unk>",
            "<s>",
            "</s>",
            "<|prompt|>",
            "<|answer|>",
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
        ],
        "template": _H2OVL_STANDIN,
        "tokens": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        "extra": {"use_msac": False},
    },
    "NVLM_D": {
        "architecture": "NVLM_D",
        "class": "NVLM_D_Config",
        "text": ("qwen2", "Qwen2ForCausalLM"),
        "specials": [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<Image>",
            "</Image>",
            "<|vision_pad|>",
        ],
        "template": CHATML_STANDIN,
        "tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    },
}


def _internvl_family(dest: Path, kind: str, specials: tuple[str, ...] = ()) -> TinyCheckpoint:
    """vLLM builds these processors itself from config fields (image_size, patch_size,
    downsample_ratio, min/max_dynamic_patch, dynamic_image_size, use_thumbnail, use_msac):
    56-pixel tiles of 7-pixel patches, pixel-shuffled by 0.5 -> 16 tokens per tile (with 4,
    the test's small images added no more tokens in ``chat`` than the example's "Image-i: "
    prefixes that ``generate`` has and vLLM's chat placeholders do not)."""

    spec = _INTERNVL_KINDS[kind]
    tok = build_tokenizer(
        dest, [*spec["specials"], *specials], chat_template=spec["template"], **spec["tokens"]
    )
    eos = spec["tokens"]["eos_token"]
    ids = token_ids(tok, [eos])
    copy_standins("internvl", dest, "configuration_internvl_chat.py")
    text_type, text_arch = spec["text"]
    config = {
        "architectures": [spec["architecture"]],
        "auto_map": {"AutoConfig": f"configuration_internvl_chat.{spec['class']}"},
        "model_type": kind,
        "vision_config": dict(INTERN_VIT),
        "llm_config": {
            **TINY_TEXT,
            "model_type": text_type,
            "architectures": [text_arch],
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids[eos],
        },
        "select_layer": -1,
        "force_image_size": 56,
        "downsample_ratio": 0.5,
        "dynamic_image_size": True,
        "use_thumbnail": True,
        "ps_version": "v2",
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 6,
        **spec.get("extra", {}),
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


def build_internvl_chat(dest: Path) -> TinyCheckpoint:
    """InternVL2 (``InternVLChatModel``); tiny text model Qwen2 (InternVL2-2B's is InternLM2)."""
    return _internvl_family(dest, "internvl_chat")


def build_internvl3(dest: Path) -> TinyCheckpoint:
    """InternVL3 (``InternVLChatModel``, the video row's): as :func:`build_internvl_chat` with
    the Qwen2.5 tokenizer's ``<|video_pad|>``, which vLLM's InternVL needs to take video (it
    expands each frame into it). Not the image row's checkpoint: with a video processor, vLLM
    0.32 also passes the image row's ``max_dynamic_patch`` to it, which it rejects."""
    return _internvl_family(dest, "internvl_chat", ("<|video_pad|>",))


def build_h2ovl_chat(dest: Path) -> TinyCheckpoint:
    """H2OVL-Mississippi (``H2OVLChatModel``): Llama-architecture text model."""
    return _internvl_family(dest, "h2ovl_chat")


def build_nvlm_d(dest: Path) -> TinyCheckpoint:
    """NVLM-D (``NVLM_D``): Qwen2 text model, ``<Image>``/``<tile_i>``/``<|vision_pad|>``."""
    return _internvl_family(dest, "NVLM_D")


# ---------------------------------------------------------------------------------------------
# Intern-S1-Pro

_INTERNS1_PRO_FILES = (
    "configuration_interns1_pro.py",
    "processing_interns1_pro.py",
    "video_processing_interns1_pro.py",
)

# Qwen's turn and vision tokens, then Intern-S1-Pro's reasoning markers.
_INTERNS1_PRO_SPECIALS = (*_QWEN_SPECIALS, "<think>", "</think>")

# At most 16 merged 32x32 patches per image or frame pair: a few placeholder tokens each.
_INTERNS1_PRO_PIXELS = {"shortest_edge": 4 * 32 * 32, "longest_edge": 16 * 32 * 32}

_INTERNS1_PRO_MEDIA = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def build_interns1_pro(dest: Path) -> TinyCheckpoint:
    """Intern-S1-Pro (``InternS1ProForConditionalGeneration``: a Qwen3-VL vision tower without
    DeepStack, a Qwen3-MoE text model with Fourier position encoding, per-head coefficients,
    and experts routed in groups) with STAND-IN config, processor and video processor classes
    and chat template (Qwen2-VL's turns; the real one is in the Hub files). The real geometry
    is kept (16-pixel patches, 2-frame temporal patches, 2x2 merges); the text model is 2 MoE
    layers of 128 with 4 experts in 2 routing groups, 2 per token (the real 512 in 8, 8 per
    token), the vision tower one block of 64. Random weights (vLLM's ``dummy`` load)."""
    copy_standins("interns1_pro", dest, *_INTERNS1_PRO_FILES)
    tokenizer = build_tokenizer(
        dest,
        _INTERNS1_PRO_SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _INTERNS1_PRO_SPECIALS)
    write_json(
        dest / "config.json",
        {
            "architectures": ["InternS1ProForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_interns1_pro.InternS1ProConfig"},
            "model_type": "interns1_pro",
            "image_token_id": ids["<|image_pad|>"],
            "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"],
            "vision_end_token_id": ids["<|vision_end|>"],
            "tie_word_embeddings": False,
            "text_config": {
                **TINY_TEXT,
                "model_type": "interns1_pro_text",
                "num_hidden_layers": 2,
                "vocab_size": padded_vocab_size(tokenizer),
                "bos_token_id": ids["<|endoftext|>"],
                "eos_token_id": ids["<|im_end|>"],
                "hidden_act": "silu",
                "rms_norm_eps": 1e-6,
                "attention_bias": False,
                "rope_theta": 5000000,
                "rope_scaling": {
                    "rope_type": "default",
                    "fope_init_factor": 0.5,
                    "fope_sep_head": True,
                    "num_inv_freq": None,
                },
                "decoder_sparse_step": 1,
                "mlp_only_layers": [],
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "router_n_groups": 2,
                "moe_intermediate_size": 64,
                "norm_topk_prob": True,
            },
            "vision_config": {
                **QWEN3_VISION,
                "model_type": "interns1_pro_vision",
                "hidden_act": "gelu_pytorch_tanh",
                "in_channels": 3,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
        },
    )
    write_json(
        dest / "preprocessor_config.json",
        {
            **_INTERNS1_PRO_MEDIA,
            "size": _INTERNS1_PRO_PIXELS,
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": "InternS1ProProcessor",
            "auto_map": {"AutoProcessor": "processing_interns1_pro.InternS1ProProcessor"},
        },
    )
    write_json(
        dest / "video_preprocessor_config.json",
        {
            **_INTERNS1_PRO_MEDIA,
            "size": _INTERNS1_PRO_PIXELS,
            "processor_class": "InternS1ProProcessor",
            "auto_map": {
                "AutoProcessor": "processing_interns1_pro.InternS1ProProcessor",
                "AutoVideoProcessor": "video_processing_interns1_pro.InternS1ProVideoProcessor",
            },
        },
    )
    write_json(
        dest / "processor_config.json",
        {
            "processor_class": "InternS1ProProcessor",
            "auto_map": {"AutoProcessor": "processing_interns1_pro.InternS1ProProcessor"},
        },
    )
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# (modality, key) -> how each row is proven (see tests.tiny.Proof): vLLM's own processor and
# model on the project's vLLM, with what the checkpoint carries in place of the model's files.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "interns1"): Proof(
        build_interns1, standin="chat template, generic tokenizer", real_prompt=False
    ),
    ("video", "interns1"): Proof(
        build_interns1, standin="chat template, generic tokenizer", real_prompt=False
    ),
    ("image", "internvl_chat"): Proof(
        build_internvl_chat, standin="config class, chat template", real_prompt=False
    ),
    ("video", "internvl_chat"): Proof(
        build_internvl3, standin="config class, chat template", real_prompt=False
    ),
    ("image", "h2ovl_chat"): Proof(
        build_h2ovl_chat, standin="config class, chat template", real_prompt=False
    ),
    ("image", "NVLM_D"): Proof(
        build_nvlm_d, standin="config class, chat template", real_prompt=False
    ),
}

UNPROVEN: dict[tuple[str, str], str] = {
    # A tiny checkpoint with stand-in config, processor and video processor classes
    # (build_interns1_pro) gets through vLLM's processor and placeholder expansion;
    # tests/e2e/test_unproven_rows_e2e.py holds the failure.
    ("image", "interns1_pro"): "vLLM 0.32 cannot build the model: "
    "InternS1ProForConditionalGeneration's __init__ reads self.model_config, which it never "
    "sets (it skips Qwen3-VL's __init__), an AttributeError before any weights load; with "
    "stand-in config and processor classes (remote code), vLLM's processor expands the image "
    "and video placeholders",
}
