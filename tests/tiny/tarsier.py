"""Tiny checkpoints of Tarsier and Tarsier2 (see tests/tiny/__init__.py), rows that only an
older vLLM runs (see tests/tiny/__main__.py). Both are config-only: vLLM initialises random
weights itself (``load_format="dummy"``), so no transformers model class is needed (Tarsier has
none).

- tarsier (vLLM 0.24): transformers' LlavaConfig with Tarsier's two extra fields, the real CLIP
  image processor; vLLM's own TarsierProcessor expands ``<image>``. The loader's prompt is
  hand-written (no template involved): real prompt format.
- tarsier2 (vLLM 0.23, and 0.24): a Qwen2-VL config saved with ``model_type: "tarsier2"`` (the
  type vLLM's Tarsier2Config registers), the real Qwen2-VL image processor; the loader's prompt
  is hand-written: real prompt format.
"""

from __future__ import annotations

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
from mmrun.tiny.qwen_vl import _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny._common import CLIP, DUMMY_ENGINE, SIGLIP, finish_config, transformers_major

# ---------------------------------------------------------------------------------------------
# Tarsier (LLaVA layout, Vicuna text, CLIP tower; vLLM 0.24)


def build_tarsier(dest: Path) -> TinyCheckpoint:
    """Tarsier-7b (``TarsierForConditionalGeneration``): LlavaConfig + image_newline_idx and
    image_new_idx, the embedding rows vLLM appends after each patch row and after each image."""
    tf = transformers_module()
    tok = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>", "<image>", "<pad>", "<image_newline>", "<image_new>"],
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    ids = token_ids(tok, ["<s>", "</s>", "<image>", "<image_newline>", "<image_new>"])
    config = tf.LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **CLIP},
        # architectures: vLLM 0.12 builds the text model from it (None fails there).
        text_config={
            **TINY_TEXT,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<s>"],
            "eos_token_id": ids["</s>"],
        },
        image_token_index=ids["<image>"],
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
    )
    finish_config(
        config,
        dest,
        "TarsierForConditionalGeneration",
        image_newline_idx=ids["<image_newline>"],
        image_new_idx=ids["<image_new>"],
    )
    size = SIGLIP["image_size"]
    tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        ),
        tokenizer=tok,
        patch_size=SIGLIP["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# ---------------------------------------------------------------------------------------------
# Tarsier2 (Qwen2-VL layout; vLLM 0.23, last with transformers 4)


def build_tarsier2(dest: Path) -> TinyCheckpoint:
    """Tarsier2-Recap-7b (``Tarsier2ForConditionalGeneration``): a Qwen2-VL config saved with
    ``model_type: "tarsier2"`` (vLLM's Tarsier2Config; vLLM re-reads it as Qwen2VLConfig)."""
    tf = transformers_module()
    # Trap: transformers 4.57's Qwen2VLProcessor checks the tokenizer's class ("Received a
    # CachedPreTrainedTokenizerFast for argument tokenizer, but a ('Qwen2Tokenizer',
    # 'Qwen2TokenizerFast') was expected"); transformers 5 does not.
    tokenizer_class = tf.Qwen2TokenizerFast if transformers_major() < 5 else None
    tok = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        tokenizer_class=tokenizer_class,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _QWEN_SPECIALS)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
    rope: dict[str, Any]
    if transformers_major() >= 5:
        rope = {"rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12]}}
    else:
        rope = {"rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]}}
    config = tf.Qwen2VLConfig(
        text_config={
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            **rope,
        },
        vision_config={
            "depth": 1,
            "num_heads": 2,
            "patch_size": 14,
            "embed_dim": 64,
            "mlp_ratio": 2,
            "hidden_size": TINY_TEXT["hidden_size"],
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    finish_config(config, dest, "Tarsier2ForConditionalGeneration", model_type="tarsier2")
    # vLLM builds Tarsier2's image and video processors from preprocessor_config.json alone.
    # At most 16 merged 28x28 patches per image. Trap: transformers 4.57 ignores ``size`` and
    # keeps its default min_pixels / max_pixels (about 100 tokens for a 320x240 photo).
    pixels = {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
    legacy = (
        {}
        if transformers_major() >= 5
        else {"min_pixels": pixels["shortest_edge"], "max_pixels": pixels["longest_edge"]}
    )
    tf.Qwen2VLImageProcessor(size=pixels, **legacy).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# (modality, key) -> how each row is proven, and on which older vLLM line (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "tarsier"): Proof(build_tarsier, env="0.24"),
    # The real checkpoint needs transformers 4 (vLLM 0.32's removal table: "last version with
    # Transformers v4"), which the 0.23 line has; the tiny one also runs on 0.24.
    ("image", "tarsier2"): Proof(build_tarsier2, env="0.23"),
}
