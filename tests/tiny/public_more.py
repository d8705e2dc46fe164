"""Tiny checkpoints of keys whose Hub checkpoints carry remote code, built with STAND-IN
classes written by this project (tests/tiny/standins/<model>/) or with the classes vLLM ships
for the model.

Each checkpoint is laid out as the Hub's is: the remote files copied into the folder and named
in config.json's ``auto_map``, loaded with ``--trust-remote-code`` as a user runs it. Weights
are random (vLLM's ``load_format="dummy"``); the tokenizer is trained locally with the model's
special tokens.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from mmrun.tiny.qwen_vl import _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny.standin import INTERN_VIT

_STANDINS = Path(__file__).resolve().parent / "standins"
_ENGINE: dict[str, Any] = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}

# STAND-IN chat template (for the chat method only; the generate prompts are the loaders'):
# plain ChatML, the turn format of the Qwen2 text models these checkpoints are built on.
_CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _write_config(dest: Path, config: dict[str, Any]) -> None:
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# BAGEL


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
        chat_template=_CHATML,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>"])
    size, patch = 56, 14
    _write_config(
        dest,
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
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Eagle 2.5

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
        chat_template=_CHATML,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>"])
    shutil.copy(_STANDINS / "eagle2_5" / "configuration_eagle2_5_vl.py", dest)
    size, patch = 56, 7
    _write_config(
        dest,
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
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Skywork-R1V

# Skywork-R1V-38B's text model is DeepSeek-R1-Distill-Qwen-32B: its turn tokens, Qwen2's, and
# InternVL's image tokens (vLLM's processor writes <img><IMG_CONTEXT>...</img>).
_SKYWORK_SPECIALS = [
    "<｜begin▁of▁sentence｜>",  # noqa: RUF001
    "<｜end▁of▁sentence｜>",  # noqa: RUF001
    "<｜User｜>",  # noqa: RUF001
    "<｜Assistant｜>",  # noqa: RUF001
    "<think>",
    "</think>",
    "<|endoftext|>",
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
]
# STAND-IN chat template: the turns of DeepSeek-R1-Distill-Qwen's template (user and
# assistant only), the text model's; Skywork-R1V's own is in its Hub tokenizer files.
_SKYWORK_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "<｜User｜>{{ message['content'] }}{% elif message['role'] == 'assistant' %}"  # noqa: RUF001
    "<｜Assistant｜>{{ message['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"  # noqa: RUF001
    "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}"  # noqa: RUF001
)


def build_skywork_chat(dest: Path) -> TinyCheckpoint:
    """Skywork-R1V-38B (``SkyworkR1VChatModel``): InternViT, an MLP projector and a Qwen2 text
    model. The config class is a STAND-IN (tests/tiny/standins/internvl/: InternVL's fields,
    which vLLM's skyworkr1v.py reads), loaded as remote code. vLLM builds the processor
    itself (InternVL tiling): 56-pixel tiles of 7-pixel patches, pixel-shuffled by 0.5 -> 16
    tokens per tile. The chat template is a STAND-IN (the text model's turns)."""
    bos, eos = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"  # noqa: RUF001
    tok = build_tokenizer(
        dest, _SKYWORK_SPECIALS, chat_template=_SKYWORK_TEMPLATE, bos_token=bos, eos_token=eos
    )
    ids = token_ids(tok, [bos, eos])
    shutil.copy(_STANDINS / "internvl" / "configuration_internvl_chat.py", dest)
    size = INTERN_VIT["image_size"]
    _write_config(
        dest,
        {
            "architectures": ["SkyworkR1VChatModel"],
            "auto_map": {"AutoConfig": "configuration_internvl_chat.SkyworkR1VChatConfig"},
            "model_type": "skywork_chat",
            "vision_config": dict(INTERN_VIT),
            "llm_config": {
                **TINY_TEXT,
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                "vocab_size": padded_vocab_size(tok),
                "bos_token_id": ids[bos],
                "eos_token_id": ids[eos],
                "hidden_act": "silu",
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "tie_word_embeddings": False,
            },
            "select_layer": -1,
            "force_image_size": size,
            "downsample_ratio": 0.5,
            "dynamic_image_size": True,
            "use_thumbnail": True,
            "ps_version": "v2",
            "min_dynamic_patch": 1,
            "max_dynamic_patch": 6,
        },
    )
    return TinyCheckpoint(dest, dict(_ENGINE))


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The generate prompt is the loader's hand-written one (vLLM's example's).
    ("image", "bagel"): Proof(build_bagel, standin="chat template"),
    ("image", "eagle2_5"): Proof(
        build_eagle2_5, standin="config class, chat template", real_prompt=False
    ),
    ("image", "skywork_chat"): Proof(
        build_skywork_chat, standin="config class, chat template", real_prompt=False
    ),
}
