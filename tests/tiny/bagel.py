"""Tiny checkpoint of BAGEL (see tests/tiny/__init__.py): vLLM ships its config and
processor classes, so no class is remote code; the chat template is a stand-in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from mmrun.tiny.qwen_vl import _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny._common import CHATML_STANDIN, DUMMY_ENGINE, write_json


def build_bagel(dest: Path) -> TinyCheckpoint:
    """BAGEL-7B-MoT (``BagelForConditionalGeneration``): vLLM ships its config (BagelConfig,
    model type "bagel") and processor (BagelProcessor: the checkpoint's SigLIP image
    processor and the tokenizer), so no class is remote code. Each image becomes
    ``vit_max_num_patch_per_side ** 2`` tokens: 56-pixel images of 14-pixel patches, 4 x 4.
    The generate prompt is the loader's (written by hand, as vLLM's example does); the chat
    template is a STAND-IN (ChatML)."""
    import transformers

    tf: Any = transformers
    tok = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=CHATML_STANDIN,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>"])
    size, patch = 56, 14
    write_json(
        dest / "config.json",
        {
            "architectures": ["BagelForConditionalGeneration"],
            "model_type": "bagel",
            "visual_gen": False,
            "visual_und": True,
            "llm_config": {
                **TINY_TEXT,
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                "vocab_size": padded_vocab_size(tok),
                "bos_token_id": ids["<|endoftext|>"],
                "eos_token_id": ids["<|im_end|>"],
                "tie_word_embeddings": False,
            },
            "vit_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "image_size": size,
                "patch_size": patch,
            },
            "vit_max_num_patch_per_side": size // patch,
            "connector_act": "gelu_pytorch_tanh",
        },
    )
    tf.SiglipImageProcessor(size={"height": size, "width": size}).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The generate prompt is the loader's hand-written one (vLLM's example's).
    ("image", "bagel"): Proof(build_bagel, standin="chat template"),
}
