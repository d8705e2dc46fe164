"""Tiny checkpoints of Mistral-Small-3.1 and Pixtral-12B in Hugging Face format (see
tests/tiny/__init__.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config

# The template transformers' convert_mistral3_weights_to_hf.py writes (Mistral-Small-3.1 HF);
# it takes text parts as either "text" or "content". vLLM's examples build these two prompts by hand
# ("<s>[INST]...[IMG][/INST]") and do not use it; it serves LLM.chat.
_MISTRAL3_TEMPLATE = (
    '{%- if messages[0]["role"] == "system" %}{%- set system_message = messages[0]["content"] %}'
    "{%- set loop_messages = messages[1:] %}\n{%- else %}{%- set loop_messages = messages %}"
    "{%- endif %}{{- bos_token }}{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{%- endif %}"
    '{%- if message["role"] == "user" %}{%- if loop.last and system_message is defined %}'
    '{{- "[INST]" + system_message + "\n\n" }}{%- else %}{{ "[INST]" }}{%- endif %}{%- endif %}'
    '{%- if message["content"] is not string %}{%- for chunk in message["content"] %}'
    '{%- if chunk["type"] == "text" %}{%- if "content" in chunk %}{{- chunk["content"] }}'
    '{%- elif "text" in chunk %}{{- chunk["text"] }}{%- endif %}'
    '{%- elif chunk["type"] == "image" %}{{- "[IMG]" }}'
    '{%- else %}{{- raise_exception("Unrecognized content type!") }}{%- endif %}{%- endfor %}'
    '{%- else %}{{- message["content"] }}{%- endif %}'
    '{%- if message["role"] == "user" %}{{- "[/INST]" }}'
    '{%- elif message["role"] == "assistant" %}{{- eos_token}}'
    '{%- else %}{{- raise_exception("Only user and assistant roles are supported, with the '
    'exception of an initial optional system message!") }}{%- endif %}{%- endfor %}'
)

_MISTRAL_SPECIALS = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[IMG]",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
]


def _pixtral_like(dest: Path, *, mistral3: bool) -> TinyCheckpoint:
    tf = transformers_module()

    tokenizer = build_tokenizer(
        dest,
        _MISTRAL_SPECIALS,
        chat_template=_MISTRAL3_TEMPLATE,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    ids = token_ids(tokenizer, ["<s>", "</s>", "[IMG]"])
    # Mistral 3 merges 2 x 2 patches of 14 pixels; Pixtral-12B takes 16-pixel patches unmerged.
    patch, merge = (14, 2) if mistral3 else (16, 1)
    longest_edge = 8 * patch * merge  # at most 8 x 8 placeholder tokens (+ breaks) per image
    vision = {
        "model_type": "pixtral",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "head_dim": 32,
        "image_size": longest_edge,
        "patch_size": patch,
    }
    text = text_config(
        tokenizer, model_type="mistral", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
    )
    config: Any
    if mistral3:
        config = tf.Mistral3Config(
            vision_config=vision,
            text_config=text,
            image_token_index=ids["[IMG]"],
            spatial_merge_size=merge,
        )
        model_class: Any = tf.Mistral3ForConditionalGeneration
    else:
        config = tf.LlavaConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=ids["[IMG]"],
            vision_feature_layer=-1,
            vision_feature_select_strategy="full",
            image_seq_length=1,
        )
        model_class = tf.LlavaForConditionalGeneration
    processor = tf.PixtralProcessor(
        image_processor=tf.PixtralImageProcessor(
            patch_size=patch, size={"longest_edge": longest_edge}
        ),
        tokenizer=tokenizer,
        patch_size=patch,
        spatial_merge_size=merge,
        chat_template=_MISTRAL3_TEMPLATE,
    )
    return finish(dest, model_class, config, processor)


def build_mistral3(dest: Path) -> TinyCheckpoint:
    """Mistral-Small-3.1 (``Mistral3ForConditionalGeneration``, Hugging Face format)."""
    return _pixtral_like(dest, mistral3=True)


def build_pixtral_hf(dest: Path) -> TinyCheckpoint:
    """Pixtral-12B community conversion (``LlavaForConditionalGeneration`` + Pixtral tower)."""
    return _pixtral_like(dest, mistral3=False)


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "mistral3"): Proof(build_mistral3),
    ("image", "pixtral_hf"): Proof(build_pixtral_hf),
}
