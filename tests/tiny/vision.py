"""Tiny offline checkpoints for the keys only vLLM's single-image and video example has (see
tests/tiny/__init__.py and tools/upstream.py).

Their loaders write the prompt by hand, as that example does, so a checkpoint proves the real
prompt format by generate; where the chat method renders a stand-in template (the real one is
not known offline), the proof says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import _QWEN2_VL_TEMPLATE, _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny.audio import BUILDERS as AUDIO_BUILDERS
from tests.tiny.image import _CLIP, _PINPOINTS, _SIGLIP, _hub_vision_tower_names, _text

# ---------------------------------------------------------------------------------------------
# Qwen3-VL


def build_qwen3_vl(dest: Path) -> TinyCheckpoint:
    """Qwen3-VL (``Qwen3VLForConditionalGeneration``: 16-pixel patches, DeepStack, interleaved
    M-RoPE), with the real Qwen3-VL image and video processors.

    Stand-in chat template (for the chat method only): Qwen2-VL's, the same turns and
    placeholders; Qwen3-VL's own adds tool calls and reasoning, and is not known offline.
    """
    return _qwen3_vl(dest, moe=False)


def build_qwen3_vl_moe(dest: Path) -> TinyCheckpoint:
    """Qwen3-VL-MoE (``Qwen3VLMoeForConditionalGeneration``): Qwen3-VL with a mixture of
    experts in each text layer (4 experts, 2 per token here); the same stand-in template."""
    return _qwen3_vl(dest, moe=True)


def _qwen3_vl(dest: Path, *, moe: bool) -> TinyCheckpoint:
    tf = transformers_module()
    tokenizer, ids = qwen3_tokenizer(dest)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 24/20/20 is for head_dim 128).
    text = _text(
        tokenizer,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [8, 12, 12],
            "mrope_interleaved": True,
        },
    )
    vision = {**QWEN3_VISION, "deepstack_visual_indexes": [0]}
    if moe:
        # norm_topk_prob: vLLM reads it (the real config.json carries it; the class has no field).
        text |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "norm_topk_prob": True,
        }
        return qwen3_checkpoint(
            dest, tf.Qwen3VLMoeConfig, tf.Qwen3VLMoeForConditionalGeneration, text, vision, ids,
            tokenizer, dummy_weights=True,
        )  # fmt: skip
    return qwen3_checkpoint(
        dest, tf.Qwen3VLConfig, tf.Qwen3VLForConditionalGeneration, text, vision, ids, tokenizer
    )


def qwen3_tokenizer(dest: Path) -> tuple[Any, dict[str, int]]:
    """The Qwen tokenizer of the Qwen3-VL-style checkpoints (Qwen3-VL, Qwen3.5) and its
    special tokens' ids, with the stand-in chat template (Qwen2-VL's)."""
    tokenizer = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    return tokenizer, token_ids(tokenizer, _QWEN_SPECIALS)


# A one-block Qwen3-VL vision tower (16-pixel patches) that feeds TINY_TEXT's hidden size.
QWEN3_VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "patch_size": 16,
    "out_hidden_size": TINY_TEXT["hidden_size"],
    "num_position_embeddings": 256,
}


def qwen3_checkpoint(
    dest: Path,
    config_class: Any,
    model_class: Any,
    text: dict[str, Any],
    vision: dict[str, Any],
    ids: dict[str, int],
    tokenizer: Any,
    *,
    dummy_weights: bool = False,
) -> TinyCheckpoint:
    """A Qwen3-VL-style checkpoint (Qwen3-VL, Qwen3.5, and their MoE forms) with the real
    Qwen3-VL processor, image and video processors. ``dummy_weights``: the config alone, vLLM
    initialising random weights itself (for the MoE forms: transformers saves the experts
    fused, in a layout vLLM's loader does not take for these models)."""
    tf = transformers_module()
    config = config_class(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    # At most 16 merged 32x32 patches per image or frame pair: a few placeholder tokens each.
    pixels = {"shortest_edge": 4 * 32 * 32, "longest_edge": 16 * 32 * 32}
    processor = tf.Qwen3VLProcessor(
        image_processor=tf.Qwen2VLImageProcessor(size=pixels, patch_size=16),
        video_processor=tf.Qwen3VLVideoProcessor(size=pixels),
        tokenizer=tokenizer,
        chat_template=_QWEN2_VL_TEMPLATE,
    )
    if dummy_weights:
        save_config(config, dest, model_class.__name__)
        processor.save_pretrained(str(dest))
        return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})
    return finish(dest, model_class, config, processor)


# ---------------------------------------------------------------------------------------------
# PaliGemma


def build_paligemma(dest: Path) -> TinyCheckpoint:
    """PaliGemma (``PaliGemmaForConditionalGeneration``: SigLIP, a linear projection, Gemma),
    with the real PaliGemma processor (which prefixes the image tokens and <bos>)."""
    return _paligemma(dest, {"model_type": "gemma"})


def build_paligemma2(dest: Path) -> TinyCheckpoint:
    """PaliGemma 2 (the same architecture on Gemma 2: a sliding-window layer and a global
    one, soft-capped logits)."""
    return _paligemma(
        dest,
        {
            "model_type": "gemma2",
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 512,
            "query_pre_attn_scalar": 64,
        },
    )


def _paligemma(dest: Path, text_overrides: dict[str, Any]) -> TinyCheckpoint:
    tf = transformers_module()
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        # vLLM's PaliGemma processor looks up "\n" (a SentencePiece piece in Gemma's vocab) to
        # end the prompt; a byte-level BPE spells it "Ċ", so it is added as a whole token.
        added_tokens=["\n"],
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, specials)
    text = _text(
        tokenizer,
        pad_token_id=ids["<pad>"],
        bos_token_id=ids["<bos>"],
        eos_token_id=ids["<eos>"],
    )
    vocab = text["vocab_size"]
    config = tf.PaliGemmaConfig(
        text_config={**text, **text_overrides},
        vision_config={**_SIGLIP, "vision_use_head": False, "projection_dim": 128},
        image_token_index=ids["<image>"],
        vocab_size=vocab,
        projection_dim=TINY_TEXT["hidden_size"],
        hidden_size=TINY_TEXT["hidden_size"],
    )
    size = _SIGLIP["image_size"]
    image_processor = tf.SiglipImageProcessor(size={"height": size, "width": size})
    # (56 / 14)^2 = 16 image tokens.
    image_processor.image_seq_length = (size // _SIGLIP["patch_size"]) ** 2
    processor = tf.PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)
    return finish(
        dest,
        tf.PaliGemmaForConditionalGeneration,
        config,
        processor,
        rename=_hub_vision_tower_names,
    )


# ---------------------------------------------------------------------------------------------
# LLaVA-NeXT-Video


def build_llava_next_video(dest: Path) -> TinyCheckpoint:
    """LLaVA-NeXT-Video (``LlavaNextVideoForConditionalGeneration``: CLIP, frames pooled 2x2,
    Llama text), with the real LLaVA-NeXT-Video processor and video processor. A video-only
    row: its prompt is written by hand ('USER: <video>...'), so no chat template is needed."""
    tf = transformers_module()
    specials = ["<unk>", "<s>", "</s>", "<image>", "<video>", "<pad>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    ids = token_ids(tokenizer, specials)
    # vLLM's pooler divides the image size by the squared patch size (336 // 14**2 = 1 for
    # the real tower): 7-pixel patches keep it 1 at 56 pixels (8 x 8 patches, pooled to 4 x 4).
    vision = {**_CLIP, "patch_size": 7}
    config = tf.LlavaNextVideoConfig(
        vision_config={"model_type": "clip_vision_model", **vision},
        text_config=_text(
            tokenizer, model_type="llama", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        image_grid_pinpoints=_PINPOINTS,
        image_seq_length=64,
        video_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = _CLIP["image_size"]
    crop = {"height": size, "width": size}
    processor = tf.LlavaNextVideoProcessor(
        video_processor=tf.LlavaNextVideoVideoProcessor(
            size={"shortest_edge": size}, crop_size=crop
        ),
        image_processor=tf.LlavaNextImageProcessor(
            size={"shortest_edge": size}, crop_size=crop, image_grid_pinpoints=_PINPOINTS
        ),
        tokenizer=tokenizer,
        patch_size=vision["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    return finish(
        dest,
        tf.LlavaNextVideoForConditionalGeneration,
        config,
        processor,
        rename=_hub_vision_tower_names,
    )


# ---------------------------------------------------------------------------------------------
# Kimi K2.5

# Kimi K2.5's turn and media tokens (mmrun's hand-written prompt uses them all).
_KIMI_K25_SPECIALS = [
    "[BOS]",
    "[EOS]",
    "<|im_end|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "<|media_begin|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
]


def build_kimi_k25(dest: Path) -> TinyCheckpoint:
    """Kimi K2.5 (``KimiK25ForConditionalGeneration``) without remote code: transformers'
    Kimi_K25Config (the class vLLM 0.32 registers for ``kimi_k25``), vLLM's own
    KimiK25Processor with its fused vision-chunk image processor (KimiK25FusedVisionProcessor,
    used when numba is installed; it reads ``media_proc_cfg`` from preprocessor_config.json),
    and a generic tokenizer with Kimi's turn and media tokens (the real one is a remote
    TikToken class). The tower is a tiny MoonViT-3D (14-pixel patches, 2 x 2 merge, 4-frame
    temporal pooling); in_patch_limit 256 keeps an image at most 64 tokens. Text model:
    vLLM's DeepseekV2ForCausalLM on a DeepSeek-V3 config (multi-head latent attention, one
    dense layer then one layer of 4 routed experts, 2 per token, and a shared expert)."""
    tok = build_tokenizer(dest, _KIMI_K25_SPECIALS, bos_token="[BOS]", eos_token="<|im_end|>")
    ids = token_ids(tok, _KIMI_K25_SPECIALS)
    text = {
        "model_type": "deepseek_v3",
        "vocab_size": padded_vocab_size(tok),
        "hidden_size": TINY_TEXT["hidden_size"],
        "intermediate_size": TINY_TEXT["intermediate_size"],
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        # Multi-head latent attention of DeepSeek-V3's sizes: vLLM's CPU MLA kernel takes
        # only a 512 + 64 latent.
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "first_k_dense_replace": 1,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "n_group": 1,
        "topk_group": 1,
        "moe_intermediate_size": 64,
        "max_position_embeddings": 4096,
        "bos_token_id": ids["[BOS]"],
        "eos_token_id": ids["<|im_end|>"],
    }
    config = {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "image_token_id": ids["<|media_pad|>"],
        "vision_start_token_id": ids["<|media_begin|>"],
        "vision_end_token_id": ids["<|media_end|>"],
        "vision_config": {
            "patch_size": 14,
            "pos_emb_height": 16,
            "pos_emb_width": 16,
            "pos_emb_time": 4,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "merge_kernel_size": [2, 2],
        },
        "text_config": text,
        "tie_word_embeddings": False,
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    media_proc_cfg = {
        "patch_size": 14,
        "merge_kernel_size": 2,
        "in_patch_limit": 256,
        "patch_limit_on_one_side": 64,
        "fixed_output_tokens": None,
        "temporal_merge_kernel_size": 4,
        "in_patch_limit_each_frame": None,
        "in_patch_limit_video": None,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    preprocessor = {"media_proc_cfg": media_proc_cfg}
    (dest / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy", "max_model_len": 4096})


BUILDERS: dict[str, Builder] = {"paligemma": build_paligemma, "paligemma2": build_paligemma2}
build_qwen2_5_omni = AUDIO_BUILDERS["qwen2_5_omni"]

# Qwen3-VL's generate prompt is its real format (written by hand, as vLLM's example does); its
# chat method renders the stand-in template.
# LLaVA-NeXT-Video is a video-only row (tests/e2e/test_video_e2e.py). Qwen2.5-Omni's image
# (and video) rows run the audio row's checkpoint: its processor carries the real Qwen2-VL
# image and video processors.
PROOFS = {
    ("image", "qwen3_vl"): Proof(build_qwen3_vl, standin="chat template"),
    ("image", "qwen3_vl_moe"): Proof(build_qwen3_vl_moe, standin="chat template"),
    ("video", "llava-next-video"): Proof(build_llava_next_video),
    ("image", "qwen2_5_omni"): Proof(build_qwen2_5_omni),
    ("image", "kimi_k25"): Proof(build_kimi_k25, standin="generic tokenizer"),
}

# Why each other key of the single-image and video example has no offline proof.
UNPROVEN: dict[str, str] = {
    # A tiny checkpoint with stand-in config, processor and video processor classes
    # (tests/tiny/interns1_pro.py) gets through vLLM's processor and placeholder expansion;
    # tests/e2e/test_engine_gaps.py holds the failure.
    "interns1_pro": "vLLM 0.32 cannot build the model: InternS1ProForConditionalGeneration's "
    "__init__ reads self.model_config, which it never sets (it skips Qwen3-VL's __init__), an "
    "AttributeError before any weights load; with stand-in config and processor classes "
    "(remote code), vLLM's processor expands the image and video placeholders",
    # vLLM 0.32's MiniCPMO is its MiniCPMV2_6 with an audio tower: the same resampler.
    "minicpmo": "remote config, processor, image processor and tokenizer classes "
    "(openbmb/MiniCPM-o-2_6), not in vLLM or transformers; and vLLM 0.32 runs its images "
    "through MiniCPM-V 2.6's resampler, which fails on the CPU backend (see minicpmv)",
    # A tiny checkpoint with stand-in config, image processor and tokenizer classes
    # (tests/tiny/minicpm.py) gets through vLLM's processor, the placeholder expansion and the
    # vision tower; tests/e2e/test_engine_gaps.py holds the failure.
    "minicpmv": "fails on vLLM 0.32's CPU backend: its resampler (Resampler2_5) calls "
    "torch.cuda.is_current_stream_capturing(), which raises on a machine without a CUDA driver",
    "nemotron_parse_35": "vLLM 0.32 runs the checkpoint's remote config and processor classes "
    "(Nemotron Parse); no public copy with a named source was found",
    "nemotron_vl": "vLLM 0.32 builds the vision tower from the checkpoint's remote C-RADIO model "
    "(AutoModel) and the image processor from remote code; the config class loads C-RADIO's "
    "config class from another Hub repository (nvidia/C-RADIOv2-H)",
    # vLLM's own model builds a full-size SAM ViT-B tower and a 24-layer, 896-wide Qwen2
    # encoder whatever the config says, and runs 768-pixel crops.
    "deepseek_ocr2": "not built: vLLM hard-codes full-size SAM ViT-B and Qwen2 encoder towers",
}
