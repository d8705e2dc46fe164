"""Tiny checkpoint of Aria (see tests/tiny/__init__.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config

# rhymes-ai/Aria's processor template (the default of its AriaProcessor).
_ARIA_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] is iterable %}{% for item in message['content'] %}"
    "{% if item['type'] == 'text' %}{{ item['text'] }}"
    "{% elif item['type'] == 'image' %}<fim_prefix><|img|><fim_suffix>{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_aria(dest: Path) -> TinyCheckpoint:
    """Aria (``AriaForConditionalGeneration``: Idefics3 tower, query projector, MoE text).

    Trap (loader, not checkpoint): the example's ``tokenizer_mode="slow"`` is rejected by vLLM
    0.32 ("No tokenizer registered for tokenizer_mode='slow'"), whatever the checkpoint.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        [
            "<unk>",
            "<s>",
            "</s>",
            "<pad>",
            "<|im_start|>",
            "<|im_end|>",
            "<fim_prefix>",
            "<fim_suffix>",
            "<|img|>",
        ],
        chat_template=_ARIA_TEMPLATE,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        image_token="<|img|>",
    )
    ids = token_ids(tokenizer, ["<s>", "<|im_end|>", "<pad>", "<|img|>"])
    # The real image sizes (490 / 980 pixels) in 70-pixel patches: 7 x 7 or 14 x 14 patches,
    # which the projector's learnt queries turn into 4 or 8 tokens (the real 128 / 256).
    patch = 70
    queries = {(490 // patch) ** 2: 4, (980 // patch) ** 2: 8}
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 980,
        "patch_size": patch,
    }
    text = text_config(
        tokenizer,
        model_type="aria_text",
        intermediate_size=128,
        moe_num_experts=4,
        moe_topk=2,
        moe_num_shared_experts=1,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<pad>"],
    )
    config = tf.AriaConfig(
        vision_config=vision,
        text_config=text,
        projector_patch_to_query_dict=queries,
        image_token_index=ids["<|img|>"],
    )
    processor = tf.AriaProcessor(
        image_processor=tf.AriaImageProcessor(max_image_size=980, min_image_size=336),
        tokenizer=tokenizer,
        chat_template=_ARIA_TEMPLATE,
        size_conversion={490: 4, 980: 8},
    )
    checkpoint = finish(dest, tf.AriaForConditionalGeneration, config, processor)
    # The loader's stop ids are the real model's (93532, ...): outside this 512-token vocabulary,
    # vLLM refuses them, so the tiny run drops them. The golden and example-parity tests pin
    # the ids.
    return dataclasses.replace(checkpoint, sampling_args={"stop_token_ids": []})


PROOFS: dict[tuple[str, str], Proof] = {("image", "aria"): Proof(build_aria)}
