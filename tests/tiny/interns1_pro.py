"""Tiny checkpoint of Intern-S1-Pro, whose config and processor classes are remote code, with
STAND-IN classes (tests/tiny/standins/interns1_pro/) written by this project from what vLLM
0.32's interns1_pro.py reads and calls: the config (a Qwen3-MoE style text model with Fourier
position encoding and grouped routing, a Qwen3-VL style vision tower), the processor and the
video processor (Qwen3-VL's under the checkpoint's names: vLLM runs Qwen3-VL's multimodal
processor over them). vLLM expands ``<|image_pad|>`` and ``<|video_pad|>`` itself from the
processors' grids. vLLM 0.32 cannot build the model itself (see the row's UNPROVEN reason in
tests/tiny/vision.py): tests/e2e/test_engine_gaps.py runs this checkpoint through vLLM's
processor and holds that failure; when a vLLM release builds the model, register it as the
image and video rows' proof (stand-in config, processor and video processor classes and chat
template; real_prompt=False, as both loaders render the chat template).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from mmrun.tiny.qwen_vl import _QWEN2_VL_TEMPLATE, _QWEN_SPECIALS
from tests.tiny.vision import QWEN3_VISION

_STANDIN = Path(__file__).resolve().parent / "standins" / "interns1_pro"
_FILES = (
    "configuration_interns1_pro.py",
    "processing_interns1_pro.py",
    "video_processing_interns1_pro.py",
)
# Qwen's turn and vision tokens, then Intern-S1-Pro's reasoning markers.
_SPECIALS = (*_QWEN_SPECIALS, "<think>", "</think>")
# At most 16 merged 32x32 patches per image or frame pair: a few placeholder tokens each.
_PIXELS = {"shortest_edge": 4 * 32 * 32, "longest_edge": 16 * 32 * 32}
_MEDIA = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def build_interns1_pro(dest: Path) -> TinyCheckpoint:
    """Intern-S1-Pro (``InternS1ProForConditionalGeneration``: a Qwen3-VL vision tower without
    DeepStack, a Qwen3-MoE text model with Fourier position encoding, per-head coefficients,
    and experts routed in groups) with STAND-IN config, processor and video processor classes
    and chat template (Qwen2-VL's turns; the real one is in the Hub files). The real geometry
    is kept (16-pixel patches, 2-frame temporal patches, 2x2 merges); the text model is 2 MoE
    layers of 128 with 4 experts in 2 routing groups, 2 per token (the real 512 in 8, 8 per
    token), the vision tower one block of 64. Random weights (vLLM's ``dummy`` load)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in _FILES:
        shutil.copy(_STANDIN / name, dest / name)
    tokenizer = build_tokenizer(
        dest,
        _SPECIALS,
        chat_template=_QWEN2_VL_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _SPECIALS)
    _write_json(
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
    _write_json(
        dest / "preprocessor_config.json",
        {
            **_MEDIA,
            "size": _PIXELS,
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": "InternS1ProProcessor",
            "auto_map": {"AutoProcessor": "processing_interns1_pro.InternS1ProProcessor"},
        },
    )
    _write_json(
        dest / "video_preprocessor_config.json",
        {
            **_MEDIA,
            "size": _PIXELS,
            "processor_class": "InternS1ProProcessor",
            "auto_map": {
                "AutoProcessor": "processing_interns1_pro.InternS1ProProcessor",
                "AutoVideoProcessor": "video_processing_interns1_pro.InternS1ProVideoProcessor",
            },
        },
    )
    _write_json(
        dest / "processor_config.json",
        {
            "processor_class": "InternS1ProProcessor",
            "auto_map": {"AutoProcessor": "processing_interns1_pro.InternS1ProProcessor"},
        },
    )
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})
