"""Tiny checkpoints of single-image rows whose config (and processor) classes are remote code,
with the model authors' OWN classes: the files of the published model repositories, vendored
unchanged (or minimally changed, as each fixture's README.md says) under
tests/fixtures/remote/<model>/ with their source and licence. A builder copies them next to
config.json, whose ``auto_map`` names them, as the Hub repository does, and the test runs them
with ``--trust-remote-code`` as a user would.

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
from tests.tiny.image import _text

_REMOTE = Path(__file__).resolve().parent.parent / "fixtures" / "remote"


def _vendor(dest: Path, model: str, *names: str) -> None:
    """Copy the vendored remote-code files of ``model`` into the checkpoint folder."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(_REMOTE / model / name, dest / name)


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
    text), with the model's own configuration_dots.py (DotsOCRConfig, DotsVLProcessor) from
    auto_map. vLLM reads the config class by name and builds transformers' Qwen2VLProcessor
    over the checkpoint's Qwen2-VL image processor (14-pixel patches, one per frame)."""
    import transformers

    tf: Any = transformers
    _vendor(dest, "dots_ocr", "configuration_dots.py")
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
        "auto_map": {
            "AutoConfig": "configuration_dots.DotsOCRConfig",
            "AutoProcessor": "configuration_dots.DotsVLProcessor",
        },
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


PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the loader's hand-written one (vLLM's example), so real; no chat template.
    ("image", "dots_ocr"): Proof(build_dots_ocr),
}
