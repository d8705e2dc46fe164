"""Tiny checkpoints of the LLaVA models in Hugging Face format (see tests/tiny/__init__.py):
LLaVA 1.5, LLaVA-NeXT, LLaVA-OneVision and LLaVA-NeXT-Video, with CLIP or SigLIP towers of
56-pixel images.

Trap: transformers 5 saves LLaVA-style CLIP/SigLIP towers as ``vision_tower.embeddings.*``; the
Hub checkpoints and vLLM's loader use ``vision_tower.vision_model.embeddings.*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import CLIP, SIGLIP, hub_vision_tower_names, text_config

# llava-hf/llava-1.5-7b-hf, chat_template.json.
_LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ message['role'].upper() + ': '}}{% endif %}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' '}}{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

# llava-hf/llava-v1.6-mistral-7b-hf, chat_template.json (no generation prompt: it ends with
# " [/INST]").
_LLAVA_NEXT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<<SYS>>\n' + message['content'][0]['text'] + '\n<</SYS>>\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' }}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{# Render all text next #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}{{' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'][0]['text'] + '<\\\\s> '}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)

# llava-hf/llava-onevision-qwen2-7b-ov-hf, chat_template.json.
_LLAVA_ONEVISION_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{# Render all images first #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{# Render all video then #}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}"
    "{{ '<video>' }}{% endfor %}"
    "{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ '\n' + content['text'] }}{% endfor %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Pinpoints of the tiny 56-pixel towers: the real ones (336 or 384 multiples) scaled down.
_PINPOINTS = [[56, 112], [112, 56], [112, 112], [56, 168], [168, 56]]


def _sentencepiece_style_tokenizer(dest: Path, template: str) -> tuple[Any, dict[str, int]]:
    """The Llama-2 / Mistral-style tokenizer of the LLaVA 1.5 and 1.6 checkpoints, and the ids
    of <s>, </s> and <image>. It puts <s> before every text; the templates do not write it."""
    tokenizer = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>", "<image>", "<pad>"],
        chat_template=template,
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    return tokenizer, token_ids(tokenizer, ["<s>", "</s>", "<image>"])


def build_llava(dest: Path) -> TinyCheckpoint:
    """LLaVA 1.5 (``LlavaForConditionalGeneration``: CLIP tower, Llama text, 'USER:' template)."""
    tf = transformers_module()

    tokenizer, ids = _sentencepiece_style_tokenizer(dest, _LLAVA_TEMPLATE)
    config = tf.LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **CLIP},
        text_config=text_config(
            tokenizer, model_type="llama", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = CLIP["image_size"]
    processor = tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        ),
        tokenizer=tokenizer,
        patch_size=CLIP["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_TEMPLATE,
    )
    return finish(
        dest, tf.LlavaForConditionalGeneration, config, processor, rename=hub_vision_tower_names
    )


def build_llava_next(dest: Path) -> TinyCheckpoint:
    """LLaVA-NeXT 1.6 Mistral (``LlavaNextForConditionalGeneration``: CLIP, any-res tiles)."""
    tf = transformers_module()

    tokenizer, ids = _sentencepiece_style_tokenizer(dest, _LLAVA_NEXT_TEMPLATE)
    config = tf.LlavaNextConfig(
        vision_config={"model_type": "clip_vision_model", **CLIP},
        text_config=text_config(
            tokenizer, model_type="mistral", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        image_grid_pinpoints=_PINPOINTS,
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = CLIP["image_size"]
    processor = tf.LlavaNextProcessor(
        image_processor=tf.LlavaNextImageProcessor(
            size={"shortest_edge": size},
            crop_size={"height": size, "width": size},
            image_grid_pinpoints=_PINPOINTS,
        ),
        tokenizer=tokenizer,
        patch_size=CLIP["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_NEXT_TEMPLATE,
    )
    return finish(
        dest,
        tf.LlavaNextForConditionalGeneration,
        config,
        processor,
        rename=hub_vision_tower_names,
    )


def build_llava_onevision(dest: Path) -> TinyCheckpoint:
    """LLaVA-OneVision (``LlavaOnevisionForConditionalGeneration``: SigLIP, Qwen2 text)."""
    tf = transformers_module()

    tokenizer = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"],
        chat_template=_LLAVA_ONEVISION_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, ["<|endoftext|>", "<|im_end|>", "<image>", "<video>"])
    config = tf.LlavaOnevisionConfig(
        vision_config={"model_type": "siglip_vision_model", **SIGLIP},
        text_config=text_config(
            tokenizer,
            model_type="qwen2",
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
        ),
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        image_grid_pinpoints=_PINPOINTS,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
    )
    size = SIGLIP["image_size"]
    processor = tf.LlavaOnevisionProcessor(
        image_processor=tf.LlavaOnevisionImageProcessor(
            size={"height": size, "width": size}, image_grid_pinpoints=_PINPOINTS
        ),
        video_processor=tf.LlavaOnevisionVideoProcessor(size={"height": size, "width": size}),
        tokenizer=tokenizer,
        num_image_tokens=(size // SIGLIP["patch_size"]) ** 2,
        vision_feature_select_strategy="full",
        chat_template=_LLAVA_ONEVISION_TEMPLATE,
    )
    return finish(
        dest,
        tf.LlavaOnevisionForConditionalGeneration,
        config,
        processor,
        rename=hub_vision_tower_names,
    )


# ---------------------------------------------------------------------------------------------
# LLaVA-NeXT-Video


def build_llava_next_video(dest: Path) -> TinyCheckpoint:
    """LLaVA-NeXT-Video (``LlavaNextVideoForConditionalGeneration``: CLIP, frames pooled 2x2,
    Llama text), with the real LLaVA-NeXT-Video processor and video processor. A video-only
    row: its prompt is written by hand ('USER: <video>...'), so no chat template is needed."""
    tf = transformers_module()
    specials = ["<unk>", "<s>", "</s>", "<image>", "<video>", "<pad>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    ids = token_ids(tokenizer, specials)
    # vLLM's pooler divides the image size by the squared patch size (336 // 14**2 = 1 for
    # the real tower): 7-pixel patches keep it 1 at 56 pixels (8 x 8 patches, pooled to 4 x 4).
    vision = {**CLIP, "patch_size": 7}
    config = tf.LlavaNextVideoConfig(
        vision_config={"model_type": "clip_vision_model", **vision},
        text_config=text_config(
            tokenizer, model_type="llama", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        video_token_index=ids["<video>"],
        image_grid_pinpoints=_PINPOINTS,
        image_seq_length=64,
        video_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = CLIP["image_size"]
    crop = {"height": size, "width": size}
    processor = tf.LlavaNextVideoProcessor(
        video_processor=tf.LlavaNextVideoVideoProcessor(
            size={"shortest_edge": size}, crop_size=crop
        ),
        image_processor=tf.LlavaNextImageProcessor(
            size={"shortest_edge": size}, crop_size=crop, image_grid_pinpoints=_PINPOINTS
        ),
        tokenizer=tokenizer,
        patch_size=vision["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    )
    return finish(
        dest,
        tf.LlavaNextVideoForConditionalGeneration,
        config,
        processor,
        rename=hub_vision_tower_names,
    )


# LLaVA-NeXT-Video is a video-only row (tests/e2e/test_video_e2e.py); LLaVA-OneVision's
# video row runs its image row's checkpoint (the processor carries the real video processor).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "llava"): Proof(build_llava),
    ("image", "llava-next"): Proof(build_llava_next),
    ("image", "llava-onevision"): Proof(build_llava_onevision),
    ("video", "llava-onevision"): Proof(build_llava_onevision),
    ("video", "llava-next-video"): Proof(build_llava_next_video),
}
