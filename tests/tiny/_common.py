"""Helpers shared by the model families' tiny builders (tests/tiny/<family>.py), on top of
mmrun.tiny._common: the tiny vision towers, a text config sized to a tokenizer, tensor names
as the Hub's checkpoints spell them, tokens at fixed ids, stand-in remote code copied into a
checkpoint, and the config-only checkpoint of a model on LLaVA-OneVision's layout.

Like mmrun.tiny._common, it imports torch, transformers and tokenizers inside the functions:
listing the builders (tests.tiny.proofs) must stay cheap, and must work in an older vLLM's
environment, whose transformers may be 4.x (see tests/tiny/__main__.py).
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    token_ids,
    transformers_module,
)

# The stand-in remote code that checkpoints carry (see tests/tiny/standins/__init__.py).
STANDINS = Path(__file__).resolve().parent / "standins"

# Config-only checkpoints: vLLM initialises random weights itself, with a short context.
DUMMY_ENGINE: Mapping[str, Any] = {**DUMMY_WEIGHTS, "max_model_len": 2048}

# Qwen-style chat tokens, shared by models of several families built on a Qwen text model.
QWEN_CHAT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# STAND-IN chat template (for the chat method only; the generate prompts are the loaders'):
# plain ChatML with string contents, the turn format of the Qwen2 text models these
# checkpoints are built on.
CHATML_STANDIN = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ---------------------------------------------------------------------------------------------
# Files


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def copy_standins(model: str, dest: Path, *names: str) -> None:
    """Copy stand-in remote code (tests/tiny/standins/<model>/: the named files, else all of
    them) into the checkpoint folder, which it creates."""
    dest.mkdir(parents=True, exist_ok=True)
    sources = [STANDINS / model / name for name in names] or sorted((STANDINS / model).glob("*.py"))
    for source in sources:
        shutil.copy(source, dest / source.name)


def byte_level_tiktoken(dest: Path) -> None:
    """A tiktoken vocabulary of the 256 bytes (no merges): ``<base64 token> <rank>`` lines."""
    dest.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))


# ---------------------------------------------------------------------------------------------
# Configs

# Tiny vision towers. 64 wide with 2 heads (head_dim 32): vLLM runs vision encoders through
# its own multi-head attention (torch SDPA on the CPU), which takes head_dim 32, unlike the
# paged attention of the language model (which needs 64, see TINY_TEXT).
CLIP = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 56,
    "patch_size": 14,
    "projection_dim": 64,
}
SIGLIP = {k: v for k, v in CLIP.items() if k != "projection_dim"}


def text_config(tokenizer: Any, **overrides: Any) -> dict[str, Any]:
    """A tiny language-model config (dict) whose vocab covers the tokenizer."""
    return {**TINY_TEXT, "vocab_size": padded_vocab_size(tokenizer), **overrides}


def vllm_config(name: str) -> Any:
    """A config module that vLLM ships (``vllm.transformers_utils.configs.<name>``)."""
    from importlib import import_module

    return import_module(f"vllm.transformers_utils.configs.{name}")


def transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def finish_config(config: Any, dest: Path, architecture: str, **fields: Any) -> None:
    """Save config.json with ``architectures`` and any fields written over the saved ones
    (e.g. a ``model_type`` that only vLLM knows)."""
    config.architectures = [architecture]
    dest.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(dest))
    if fields:
        path = dest / "config.json"
        data = json.loads(path.read_text())
        data.update(fields)
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------
# Tensor names


def hub_vision_tower_names(name: str) -> str:
    """``vision_tower.X`` -> ``vision_tower.vision_model.X``, as in the Hub's CLIP/SigLIP towers."""
    prefix = "vision_tower."
    if name.startswith(prefix) and not name.startswith(prefix + "vision_model."):
        return prefix + "vision_model." + name[len(prefix) :]
    return name


def model_vision_tower_names(name: str) -> str:
    """``model.vision_tower.X`` -> ``model.vision_tower.vision_model.X``: the SigLIP tower's
    names as the Hub checkpoint has them, which vLLM loads."""
    prefix = "model.vision_tower."
    if name.startswith(prefix) and not name.startswith(prefix + "vision_model."):
        return prefix + "vision_model." + name[len(prefix) :]
    return name


# ---------------------------------------------------------------------------------------------
# Tokens


def place_tokens(hf_tokenizer: Any, placed: dict[int, str], dest: Path) -> Any:
    """Re-save ``hf_tokenizer`` so that each token of ``placed`` (added, special) gets its id:
    the BPE model's vocabulary is padded with unreachable filler entries between them.
    Needed where vLLM hard-codes a token id (e.g. Ovis: ``<|image_pad|>`` = 151655); the
    ``tokenizers`` library ignores an id written into ``added_tokens`` and renumbers it."""
    import transformers
    from tokenizers import AddedToken, Tokenizer

    tf: Any = transformers

    data = json.loads(hf_tokenizer.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    taken = {t["id"] for t in data["added_tokens"]} | set(vocab.values())
    # The fixed tokens go into the model vocabulary at their ids, fillers fill the gaps (the
    # vocabulary must be contiguous); adding them as special tokens afterwards keeps the ids
    # (tokenizers reuses a model id for an added token it already knows).
    for i in range(max(taken) + 1, max(placed) + 1):
        vocab[placed.get(i, f"<|filler_{i}|>")] = i
    raw = Tokenizer.from_str(json.dumps(data))
    raw.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in placed.values()])
    for i, t in placed.items():
        assert raw.token_to_id(t) == i, (t, raw.token_to_id(t))
    wrapped = tf.PreTrainedTokenizerFast(
        tokenizer_object=raw,
        chat_template=hf_tokenizer.chat_template,
        **{k: v for k, v in hf_tokenizer.special_tokens_map.items() if isinstance(v, str)},
    )
    wrapped.save_pretrained(str(dest))
    return wrapped


# ---------------------------------------------------------------------------------------------
# A model on LLaVA-OneVision's layout with stand-in classes (Bee, R-4B)

# Qwen3's turn tokens, its reasoning block, and the image placeholder vLLM expands.
_ONEVISION_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<image>",
)

# STAND-IN chat template (the real ones are in the checkpoints' files, not known offline):
# ChatML turns, each image part as <image> and a newline where the content puts it.
_ONEVISION_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_onevision_standin(
    dest: Path,
    *,
    standins: str,
    architecture: str,
    model_type: str,
    config_class: str,
    processor_class: str,
    max_tiles: int,
    extra_config: Mapping[str, Any] | None = None,
) -> TinyCheckpoint:
    """A one-layer SigLIP tower of width 64 and a one-layer Qwen3 text model, random weights
    (``load_format="dummy"``), 56-pixel tiles of 14-pixel patches (4 x 4 features per tile),
    any-resolution grids of 1 to ``max_tiles`` tiles a side; a generic tokenizer (byte-level
    BPE) carrying Qwen3's tokens and ``<image>``, and the STAND-IN chat template.

    ``standins``: the folder of tests/tiny/standins/ whose two files (``configuration_*.py``
    with ``config_class``, ``processing_*.py`` with ``processor_class``, named
    ``module.Class``) the checkpoint carries; ``extra_config``: the config's own fields, after
    the grid."""
    tf = transformers_module()
    modules = [name.split(".")[0] + ".py" for name in (config_class, processor_class)]
    copy_standins(standins, dest, *modules)
    tok = build_tokenizer(
        dest,
        _ONEVISION_SPECIALS,
        chat_template=_ONEVISION_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _ONEVISION_SPECIALS)
    tile, patch = 56, 14
    sides = range(1, max_tiles + 1)
    pinpoints = [[tile * h, tile * w] for h in sides for w in sides]
    config: dict[str, Any] = {
        "architectures": [architecture],
        "auto_map": {"AutoConfig": config_class},
        "model_type": model_type,
        "image_token_index": ids["<image>"],
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "full",
        "image_grid_pinpoints": pinpoints,
        **(extra_config or {}),
        "projector_hidden_act": "gelu",
        "multimodal_projector_bias": True,
        "tie_word_embeddings": False,
        "vision_config": {
            "model_type": "siglip_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": tile,
            "patch_size": patch,
            "vision_use_head": False,
        },
        "text_config": {
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "tie_word_embeddings": False,
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    image_processor = tf.LlavaOnevisionImageProcessor(
        size={"height": tile, "width": tile},
        crop_size={"height": tile, "width": tile},
        image_grid_pinpoints=pinpoints,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    image_processor.save_pretrained(str(dest))
    preprocessor = dest / "preprocessor_config.json"
    settings = json.loads(preprocessor.read_text())
    settings["processor_class"] = processor_class.split(".")[1]
    settings["auto_map"] = {"AutoProcessor": processor_class}
    preprocessor.write_text(json.dumps(settings, indent=2) + "\n")
    (dest / "chat_template.jinja").write_text(_ONEVISION_TEMPLATE)
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))
