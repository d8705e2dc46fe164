"""Tiny checkpoints of image seed rows whose processor classes are remote code, with STAND-IN
classes (tests/tiny/standins/) written by this project from what vLLM 0.32 reads and calls.
They prove vLLM's own multimodal processor, placeholder expansion and model path; they do
not prove the original classes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer
from tests.tiny import Proof
from tests.tiny.standin import _place_tokens

_STANDINS = Path(__file__).parent / "standins"


def _copy_standins(model: str, dest: Path) -> None:
    for source in sorted((_STANDINS / model).glob("*.py")):
        shutil.copy(source, dest)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


# Phi-3.5-vision's special tokens at their ids; vLLM 0.32 hard-codes <|image|> = 32044.
_PHI3_TOKENS = {
    32000: "<|endoftext|>",
    32001: "<|assistant|>",
    32007: "<|end|>",
    32010: "<|user|>",
    32044: "<|image|>",
}


def build_phi3_v(dest: Path) -> TinyCheckpoint:
    """Phi-3.5-vision (``Phi3VForCausalLM``): STAND-IN config, processor and image processor
    classes; vLLM's own multimodal processor and model. vLLM builds the CLIP ViT-L/14-336
    tower from a hard-coded config (1024 wide, 336-pixel crops): ``layer_idx`` 0 keeps one of
    its layers. The vocabulary must reach the hard-coded image id (32064 embedding rows)."""
    tok = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>"],
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    tok = _place_tokens(tok, _PHI3_TOKENS, dest)
    _copy_standins("phi3_v", dest)
    config = {
        "architectures": ["Phi3VForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_phi3_v.Phi3VConfig",
            "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
        },
        "model_type": "phi3_v",
        **TINY_TEXT,
        "vocab_size": 32064,
        "bos_token_id": 1,
        "eos_token_id": 32000,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "embd_layer": {
            "embedding_cls": "image",
            "hd_transform_order": "sub_glb",
            "projection_cls": "mlp",
            "use_hd_transform": True,
            "with_learnable_separator": True,
        },
        "img_processor": {
            "image_dim_out": 1024,
            "model_name": "openai/clip-vit-large-patch14-336",
            "name": "clip_vision_model",
            "num_img_tokens": 144,
            "layer_idx": 0,
        },
    }
    _write_json(dest / "config.json", config)
    auto_map = {
        "AutoImageProcessor": "image_processing_phi3_v.Phi3VImageProcessor",
        "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
    }
    _write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "Phi3VImageProcessor",
            "processor_class": "Phi3VProcessor",
            "num_crops": 4,
            "auto_map": auto_map,
        },
    )
    _write_json(
        dest / "processor_config.json",
        {
            "processor_class": "Phi3VProcessor",
            "auto_map": {"AutoProcessor": auto_map["AutoProcessor"]},
        },
    )
    return TinyCheckpoint(dest, {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the seed's hand-written one (no chat template in the checkpoint); the
    # stand-in processor only sets how many placeholder tokens an image expands to.
    ("image", "phi3_v"): Proof(build_phi3_v, standin="config, processor classes"),
}
