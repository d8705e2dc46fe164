"""Tiny checkpoints of StepFun's Step3 and Step3-VL (see tests/tiny/__init__.py).

Step3-VL's config class is remote code: a STAND-IN config class (tests/tiny/standins/stepvl/)
written from the fields vLLM reads, vLLM's own Step3-VL processor (it builds it from the
tokenizer, whatever the checkpoint holds) and model. It proves the loader's hand-written prompt
on the engine (vLLM's processor, placeholder expansion, the PerceptionEncoder tower, the Qwen3
text model), not the original config class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import CPU_ARGS, TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import copy_standins

# ---------------------------------------------------------------------------------------------
# Step3

# DeepSeek-style sentence markers, spelt with FULLWIDTH VERTICAL LINE and LOWER ONE EIGHTH
# BLOCK as in the real vocabulary (escaped here so that no look-alike character is in the source).
_STEP3_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"

_STEP3_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"


def build_step3(dest: Path) -> TinyCheckpoint:
    """Step3 (``Step3VLForConditionalGeneration``): config only, random weights by vLLM.

    The architecture exists only in vLLM (its own config and processor classes), so there is
    no transformers model class to initialise weights from: vLLM's ``load_format="dummy"``
    does it. vLLM's example writes its prompt by hand and uses no chat template; none is saved (the
    real one is not reproducible offline), so ``LLM.chat`` does not apply to this checkpoint.
    """
    import json

    specials = [
        _STEP3_BOS,
        _STEP3_EOS,
        "<|BOT|>",
        "<|EOT|>",
        "<im_patch>",
        "<im_start>",
        "<im_end>",
        "<patch_start>",
        "<patch_end>",
        "<patch_newline>",
        "<think>",
        "</think>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        bos_token=_STEP3_BOS,
        eos_token=_STEP3_EOS,
    )
    ids = token_ids(tokenizer, specials)
    # vLLM's Step3 image processor fixes 169 tokens per image and 81 per 504-pixel crop, which
    # the real geometry gives (728- and 504-pixel inputs, 14-pixel patches, projector stride
    # 2); only the widths are shrunk. Text: one dense layer then one MoE layer, one KV head
    # (vLLM's Step3 attention requires it), head_dim 64.
    config = {
        "architectures": ["Step3VLForConditionalGeneration"],
        "model_type": "step3_vl",
        "image_token_id": ids["<im_patch>"],
        "understand_projector_stride": 2,
        "projector_bias": True,
        "bos_token_id": ids[_STEP3_BOS],
        "eos_token_id": [ids[_STEP3_EOS], ids["<|EOT|>"]],
        "torch_dtype": "bfloat16",
        "vision_config": {
            "model_type": "step3_vision_encoder",
            "hidden_size": 64,
            "intermediate_size": 128,
            "output_hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 728,
            "patch_size": 14,
        },
        "text_config": {
            "model_type": "step3_text",
            "architectures": ["Step3TextForCausalLM"],
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": 256,
            "num_attention_heads": 2,
            "num_attention_groups": 1,
            "num_hidden_layers": 2,
            "head_dim": 64,
            "share_q_dim": 64,
            "vocab_size": padded_vocab_size(tokenizer),
            "max_seq_len": 4096,
            "max_position_embedding": 4096,
            "moe_intermediate_size": 64,
            "moe_num_experts": 4,
            "moe_top_k": 2,
            "share_expert_dim": 64,
            "moe_layers_enum": "1",
            "torch_dtype": "bfloat16",
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    return TinyCheckpoint(dest, {**CPU_ARGS, "max_model_len": 4096, "load_format": "dummy"})


# ---------------------------------------------------------------------------------------------
# Step3-VL

_STEPVL_SPECIALS = (
    _STEP3_BOS,
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
        bos_token=_STEP3_BOS,
        eos_token="<|EOT|>",
    )
    ids = token_ids(tok, [_STEP3_BOS, "<|EOT|>", "<im_patch>"])
    copy_standins("stepvl", dest, "configuration_step_vl.py")
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
            "bos_token_id": ids[_STEP3_BOS],
            "eos_token_id": ids["<|EOT|>"],
            "tie_word_embeddings": False,
        },
        "bos_token_id": ids[_STEP3_BOS],
        "eos_token_id": ids["<|EOT|>"],
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "step3"): Proof(build_step3),
    # The generate prompt is the loader's (written by hand, as vLLM's example's); chat runs the
    # stand-in template.
    ("image", "stepvl"): Proof(build_stepvl, standin="config class, chat template"),
}
