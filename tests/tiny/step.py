"""Tiny checkpoint of Step3-VL (``StepVLForConditionalGeneration``), whose config class is
remote code: a STAND-IN config class (tests/tiny/standins/stepvl/) written from the fields
vLLM reads, vLLM's own Step3-VL processor (it builds it from the tokenizer, whatever the
checkpoint holds) and model. It proves the loader's hand-written prompt on the engine (vLLM's
processor, placeholder expansion, the PerceptionEncoder tower, the Qwen3 text model), not the
original config class.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof

_STANDINS = Path(__file__).parent / "standins"

# The tokens of the loader's prompt (mmrun/modalities/image/step.py): the BOS spelled with
# fullwidth bars and U+2581, the turn markers, the reasoning block, and the image tokens that
# vLLM's Step3VLProcessor looks up by name (each image: <im_start>, its features as
# <im_patch>, <im_end>; the patch tokens frame the crops, which the loader turns off).
_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
_STEPVL_SPECIALS = (
    _BOS,
    "<|BOT|>",
    "<|EOT|>",
    "<think>",
    "</think>",
    "<im_patch>",
    "<im_start>",
    "<im_end>",
    "<patch_start>",
    "<patch_end>",
    "<patch_newline>",
)
# STAND-IN chat template (the real one is in the checkpoint's tokenizer files, not known
# offline): the turns of the loader's prompt, each image as <im_patch> where the content puts
# it, and the generation prompt opening the reasoning block as the loader's does.
_STEPVL_TEMPLATE = (
    "{{ bos_token }} You are a helpful assistant."
    "{% for message in messages %}{{ '<|BOT|>' + message['role'] + '\n ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<im_patch>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|EOT|>{% endfor %}"
    "{% if add_generation_prompt %}<|BOT|>assistant\n<think>\n{% endif %}"
)


def build_stepvl(dest: Path) -> TinyCheckpoint:
    """Step3-VL-10B (``StepVLForConditionalGeneration``): a one-layer PerceptionEncoder tower
    of width 64 and a one-layer Qwen3 text model (the real ones: a 1.8B perception encoder and
    Qwen3-8B), random weights (``load_format="dummy"``).

    The image geometry is the real one, which vLLM's processor fixes: each image is resized to
    728 x 728 pixels, 14-pixel patches (52 x 52), downsampled twice by stride-2 convolutions to
    13 x 13 = 169 features, the feature count vLLM's Step3VLImageProcessor hard-codes. The
    tokenizer is a generic one (byte-level BPE) carrying the loader's tokens; its chat template
    is a STAND-IN (see ``_STEPVL_TEMPLATE``)."""
    tok = build_tokenizer(
        dest,
        _STEPVL_SPECIALS,
        chat_template=_STEPVL_TEMPLATE,
        bos_token=_BOS,
        eos_token="<|EOT|>",
    )
    ids = token_ids(tok, [_BOS, "<|EOT|>", "<im_patch>"])
    shutil.copy(_STANDINS / "stepvl" / "configuration_step_vl.py", dest)
    config: dict[str, Any] = {
        "architectures": ["StepVLForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_step_vl.StepVLConfig"},
        "model_type": "step_vl",
        "projector_bias": False,
        "image_token_id": ids["<im_patch>"],
        "understand_projector_stride": 2,
        "vision_config": {
            "width": 64,
            "layers": 1,
            "heads": 2,
            "patch_size": 14,
            "image_size": 728,
            "mlp_ratio": 2.0,
            "ls_init_value": 0.1,
            "hidden_act": "gelu",
            "use_abs_posemb": True,
            "use_cls_token": False,
            "use_rope2d": True,
            "use_ln_pre": True,
            "use_ln_post": True,
            "enable_patch": True,  # the loader's hf_overrides turn it off
        },
        "text_config": {
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids[_BOS],
            "eos_token_id": ids["<|EOT|>"],
            "tie_word_embeddings": False,
        },
        "bos_token_id": ids[_BOS],
        "eos_token_id": ids["<|EOT|>"],
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


# The generate prompt is the loader's (written by hand, as vLLM's example's); chat runs the
# stand-in template.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "stepvl"): Proof(build_stepvl, standin="config class, chat template"),
}
