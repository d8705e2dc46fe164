"""Tiny checkpoint of MiniCPM-V 2.6, whose config, image processor and tokenizer classes are
remote code, with STAND-IN classes (tests/tiny/standins/minicpmv/) written by this project from
what vLLM 0.32 reads and calls. vLLM runs its own MiniCPMVProcessor (the checkpoint's
preprocessor config names it), which calls the stand-in image processor and tokenizer.

Not a proof: on vLLM 0.32's CPU backend an image or a clip gets through vLLM's processor,
the placeholder expansion and the SigLIP tower, then the resampler calls
``torch.cuda.is_current_stream_capturing()``, which raises on a machine without a CUDA driver
(tests/e2e/test_unproven_rows_e2e.py holds that failure). When a vLLM release runs it, register
:func:`build_minicpmv` as the image and video rows' proof (standin: "config, image processor
and tokenizer classes, chat template", real_prompt=False: the loaders render the tokenizer's
template, a stand-in here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny._common import copy_standins, write_json

_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<unk>",
    "<image>",
    "</image>",
    "<slice>",
    "</slice>",
    "<image_id>",
    "</image_id>",
    "<ref>",
    "</ref>",
    "<box>",
    "</box>",
    "<quad>",
    "</quad>",
    "<point>",
    "</point>",
)

# STAND-IN chat template (the checkpoint's own is in its Hub tokenizer files): ChatML turns,
# string or part contents.
_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Slicing resolution and resampler queries per slice (the real 448 and 64): an image is an
# overview and at most 9 slices of about 56x56 pixels, each 16 tokens.
_SCALE = 56

_QUERIES = 16

_PATCH = 14

# vLLM's CPU engine without torch.compile (as the e2e tests run it), and a context that holds
# the profiling run's image (10 slices) and a few frames.
_ENGINE: dict[str, Any] = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}


def build_minicpmv(dest: Path) -> TinyCheckpoint:
    """MiniCPM-V 2.6 (``MiniCPMV``, version 2.6): a two-layer SigLIP tower, the 2.5-style
    resampler (one head: vLLM gives it hidden_size / 128 heads) and a one-layer Qwen2 language
    model, with STAND-IN config, image processor and tokenizer classes and chat template; the
    tokenizer is trained locally with the real special tokens. Random weights (dummy load)."""
    copy_standins("minicpmv", dest)
    tok = build_tokenizer(
        dest,
        _SPECIALS,
        chat_template=_TEMPLATE,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
    )
    ids = token_ids(tok, _SPECIALS)
    tok_config_path = dest / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text())
    tok_config["tokenizer_class"] = "MiniCPMVTokenizerFast"
    tok_config["auto_map"] = {
        "AutoTokenizer": [None, "tokenization_minicpmv_fast.MiniCPMVTokenizerFast"]
    }
    write_json(tok_config_path, tok_config)
    write_json(
        dest / "config.json",
        {
            "architectures": ["MiniCPMV"],
            "auto_map": {"AutoConfig": "configuration_minicpm.MiniCPMVConfig"},
            "model_type": "minicpmv",
            "version": 2.6,
            **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},
            "hidden_act": "silu",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": False,
            "use_sliding_window": False,
            "query_num": _QUERIES,
            "image_size": _SCALE,
            "drop_vision_last_layer": False,
            "batch_vision_input": True,
            "slice_mode": True,
            "slice_config": {"max_slice_nums": 9, "patch_size": _PATCH, "model_type": "minicpmv"},
            "use_image_id": True,
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "image_size": 70,
                "patch_size": _PATCH,
            },
        },
    )
    write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "MiniCPMVImageProcessor",
            "processor_class": "MiniCPMVProcessor",
            # vLLM runs its own MiniCPMVProcessor (named here) around these classes.
            "auto_map": {"AutoImageProcessor": "image_processing_minicpmv.MiniCPMVImageProcessor"},
            "max_slice_nums": 9,
            "scale_resolution": _SCALE,
            "patch_size": _PATCH,
            "image_feature_size": _QUERIES,
            "use_image_id": True,
            "slice_mode": True,
            "im_start": "<image>",
            "im_end": "</image>",
            "slice_start": "<slice>",
            "slice_end": "</slice>",
            "unk": "<unk>",
            "im_id_start": "<image_id>",
            "im_id_end": "</image_id>",
            "norm_mean": [0.5, 0.5, 0.5],
            "norm_std": [0.5, 0.5, 0.5],
            "version": 2.6,
        },
    )
    return TinyCheckpoint(dest, dict(_ENGINE))


# Why the MiniCPM rows have no offline proof on vLLM 0.32 + transformers 5.19.
UNPROVEN: dict[tuple[str, str], str] = {
    ("audio", "minicpmo"): "needs remote code (MiniCPMOConfig and the checkpoint's processor)",
    # vLLM 0.32's MiniCPMO is its MiniCPMV2_6 with an audio tower: the same resampler.
    ("image", "minicpmo"): "remote config, processor, image processor and tokenizer classes "
    "(openbmb/MiniCPM-o-2_6), not in vLLM or transformers; and vLLM 0.32 runs its images "
    "through MiniCPM-V 2.6's resampler, which fails on the CPU backend (see minicpmv)",
    # A tiny checkpoint with stand-in config, image processor and tokenizer classes
    # (build_minicpmv) gets through vLLM's processor, the placeholder expansion and the vision
    # tower; tests/e2e/test_unproven_rows_e2e.py holds the failure.
    ("image", "minicpmv"): "fails on vLLM 0.32's CPU backend: its resampler (Resampler2_5) "
    "calls torch.cuda.is_current_stream_capturing(), which raises on a machine without a "
    "CUDA driver",
}
