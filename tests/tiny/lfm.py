"""Tiny checkpoint of LFM2-VL (see tests/tiny/__init__.py): the model's real config class
with small sizes, a BPE tokenizer trained locally with the model's real special tokens, and
the model's real processor classes; the chat template is a stand-in.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import model_vision_tower_names, text_config

# The real tokenizer's named tokens (Lfm2VlProcessor reads the image ones by name).
_LFM2_VL_TOKENS = {
    "bos_token": "<|startoftext|>",
    "eos_token": "<|im_end|>",
    "pad_token": "<|pad|>",
    "image_token": "<image>",
    "image_start_token": "<|image_start|>",
    "image_end_token": "<|image_end|>",
    "image_thumbnail_token": "<|img_thumbnail|>",
}

# STAND-IN chat template: ChatML turns after the BOS, each image as <image> where the content
# puts it (the real template, not known offline, also has tool-use parts).
_LFM2_VL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_lfm2_vl(dest: Path) -> TinyCheckpoint:
    """LFM2-VL (``Lfm2VlForConditionalGeneration``): a hybrid LFM2 text model (a short
    convolution layer, then an attention layer), a SigLIP 2 NaFlex tower, pixel-unshuffled
    2x2 into the projector, and the real LFM2-VL processor and image processor (one tile per
    image here, at most 64 image tokens; the real one splits large images into 512-pixel
    tiles).

    Stand-in chat template (the prompt of both methods): ChatML after the BOS, as in
    transformers' processor tests; the real template is not known offline.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest, ["<|im_start|>"], chat_template=_LFM2_VL_TEMPLATE, **_LFM2_VL_TOKENS
    )
    ids = token_ids(tokenizer, _LFM2_VL_TOKENS.values())
    text = text_config(
        tokenizer,
        model_type="lfm2",
        architectures=["Lfm2ForCausalLM"],
        num_hidden_layers=2,
        layer_types=["conv", "full_attention"],
        pad_token_id=ids["<|pad|>"],
        bos_token_id=ids["<|startoftext|>"],
        eos_token_id=ids["<|im_end|>"],
    )
    del text["head_dim"]  # LFM2 derives it: hidden_size / num_attention_heads = 64
    # vLLM reads the widths of the convolution and feed-forward blocks from these two fields,
    # which the real config.json carries and transformers' Lfm2Config does not declare.
    text |= {"conv_dim": text["hidden_size"], "block_dim": text["hidden_size"]}
    config = tf.Lfm2VlConfig(
        text_config=text,
        vision_config={
            "model_type": "siglip2_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "patch_size": 16,
            "num_patches": 256,
            "vision_use_head": False,
        },
        image_token_id=ids["<image>"],
        projector_hidden_size=TINY_TEXT["hidden_size"],
        downsample_factor=2,
    )
    image_processor = tf.Lfm2VlImageProcessor(
        do_image_splitting=False, min_image_tokens=16, max_image_tokens=64
    )
    processor = tf.Lfm2VlProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=_LFM2_VL_TEMPLATE
    )
    return finish(
        dest, tf.Lfm2VlForConditionalGeneration, config, processor, rename=model_vision_tower_names
    )


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "lfm2_vl"): Proof(build_lfm2_vl, standin="chat template", real_prompt=False),
}
