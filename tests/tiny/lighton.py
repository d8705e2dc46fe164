"""Tiny checkpoint of LightOnOCR (see tests/tiny/__init__.py). Its loader writes the prompt
by hand, as vLLM's single-image and video example does, so the checkpoint proves the real
prompt format by generate; the chat method renders a stand-in template.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    build_tokenizer,
    save_config,
    save_random_weights,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny._common import text_config

# STAND-IN chat template (for the chat method only), in the turn layout of the loader's
# hand-written prompt: an empty system turn, then each image as <|image_pad|> before the text.
_LIGHTONOCR_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system<|im_end|>\n{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|image_pad|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_lightonocr(dest: Path) -> TinyCheckpoint:
    """LightOnOCR (``LightOnOCRForConditionalGeneration``: Pixtral tower, Mistral 3's patch
    merger and projector, Qwen3 text), with a stand-in chat template.

    Its config.json is a Mistral 3 config naming the LightOnOCR architecture, as the Hub's
    is; vLLM builds the processor as a Pixtral processor (image, break and end tokens from
    processor_config.json), which is what this checkpoint saves. The weights are initialised
    with transformers' LightOnOcr classes, which save them under the Hub's names
    (``model.vision_encoder.*``, ``model.vision_projection.*``).
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        chat_template=_LIGHTONOCR_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, _QWEN_SPECIALS)
    # 14-pixel patches merged 2 x 2: at most 112 pixels a side, 4 x 4 image tokens.
    vision = {
        "model_type": "pixtral",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "head_dim": 32,
        "image_size": 112,
        "patch_size": 14,
    }
    text = text_config(
        tokenizer,
        model_type="qwen3",
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    shared = {
        "vision_config": vision,
        "text_config": text,
        "image_token_id": ids["<|image_pad|>"],
        "spatial_merge_size": 2,
        "tie_word_embeddings": True,
    }
    save_random_weights(
        tf.LightOnOcrForConditionalGeneration,
        tf.LightOnOcrConfig(**shared),
        dest,
        dtype="bfloat16",
    )
    config = tf.Mistral3Config(
        **shared,
        projector_hidden_act="gelu",
        multimodal_projector_bias=False,
        vision_feature_layer=-1,
    )
    save_config(config, dest, "LightOnOCRForConditionalGeneration")
    processor = tf.PixtralProcessor(
        image_processor=tf.PixtralImageProcessor(
            size={"longest_edge": vision["image_size"]}, patch_size=vision["patch_size"]
        ),
        tokenizer=tokenizer,
        patch_size=vision["patch_size"],
        spatial_merge_size=2,
        image_token="<|image_pad|>",
        image_break_token="<|vision_pad|>",
        image_end_token="<|vision_end|>",
        chat_template=_LIGHTONOCR_TEMPLATE,
    )
    processor.save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(CPU_ARGS))


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "lightonocr"): Proof(build_lightonocr, standin="chat template"),
}
