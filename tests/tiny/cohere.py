"""A tiny Command A Vision checkpoint (``Cohere2VisionForConditionalGeneration``: a SigLIP
tower, a pixel-shuffle projector, Cohere 2 text) with transformers' own Cohere2Vision
processor and image processor.

The loader renders its prompt with the checkpoint's chat template, and Command A Vision's real
template (a long system preamble) is not available offline: this checkpoint carries a STAND-IN
template in Cohere's turn format, so the proof covers vLLM's processor, placeholder expansion
and model on mmrun's request, not the exact prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny.image import _SIGLIP

# Turns as Cohere's models write them; each image is the processor's image token, which the
# processor expands to <|START_OF_IMG|>, its tiles' patch tokens and line breaks, <|END_OF_IMG|>.
_STANDIN_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|START_OF_TURN_TOKEN|>{% if message['role'] == 'user' %}<|USER_TOKEN|>"
    "{% elif message['role'] == 'system' %}<|SYSTEM_TOKEN|>{% else %}<|CHATBOT_TOKEN|>{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|IMG_PATCH|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)
_MEDIA = {
    "image_token": "<|IMG_PATCH|>",
    "boi_token": "<|START_OF_IMG|>",
    "eoi_token": "<|END_OF_IMG|>",
    "img_line_break_token": "<|IMG_LINE_BREAK|>",
}
_SPECIALS = (
    "<PAD>",
    "<UNK>",
    "<BOS_TOKEN>",
    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    *_MEDIA.values(),
)


def build_command_a_vision(dest: Path) -> TinyCheckpoint:
    """Each 56-pixel tile gives (56 / 14 / 2)^2 = 4 patch tokens (2x2 pixel shuffle) and a
    line break; at most 2 tiles and a thumbnail per image."""
    tf: Any = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _SPECIALS,
        chat_template=_STANDIN_TEMPLATE,
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        pad_token="<PAD>",
        unk_token="<UNK>",
        extra_special_tokens=dict(_MEDIA),
    )
    ids = token_ids(tokenizer, _SPECIALS)
    downsample = 2
    config = tf.Cohere2VisionConfig(
        vision_config={"model_type": "siglip_vision_model", **_SIGLIP},
        text_config={
            **TINY_TEXT,
            "model_type": "cohere2",
            "vocab_size": padded_vocab_size(tokenizer),
            "bos_token_id": ids["<BOS_TOKEN>"],
            "eos_token_id": ids["<|END_OF_TURN_TOKEN|>"],
            "pad_token_id": ids["<PAD>"],
        },
        downsample_factor=downsample,
        image_token_id=ids[_MEDIA["image_token"]],
        alignment_intermediate_size=128,
    )
    size = _SIGLIP["image_size"]
    processor = tf.Cohere2VisionProcessor(
        image_processor=tf.Cohere2VisionImageProcessor(
            size={"height": size, "width": size},
            patch_size=size // _SIGLIP["patch_size"] // downsample,
            min_patches=1,
            max_patches=2,
        ),
        tokenizer=tokenizer,
        chat_template=_STANDIN_TEMPLATE,
    )
    return finish(
        dest,
        tf.Cohere2VisionForConditionalGeneration,
        config,
        processor,
        rename=_hub_names,
    )


def _hub_names(name: str) -> str:
    """``model.vision_tower.X`` -> ``model.vision_tower.vision_model.X``: the SigLIP tower's
    names as the Hub checkpoint has them, which vLLM loads."""
    prefix = "model.vision_tower."
    if name.startswith(prefix) and not name.startswith(prefix + "vision_model."):
        return prefix + "vision_model." + name[len(prefix) :]
    return name


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "command_a_vision"): Proof(
        build_command_a_vision, standin="chat template", real_prompt=False
    ),
}
