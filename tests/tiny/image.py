"""Tiny offline checkpoints for the image seed models (see tests/tiny/__init__.py).

Each builder keeps the real model's geometry wherever vLLM or the seed depends on it (tile
sizes that the seeds' ``mm_processor_kwargs`` name, fixed feature counts) and shrinks only
widths and depths: a tile of the real size cut into a few large patches gives a handful of
placeholder tokens per image instead of hundreds.

Traps met while proving these on vLLM 0.32 / transformers 5 (also noted where they apply):

- transformers 5 saves LLaVA-style CLIP/SigLIP towers as ``vision_tower.embeddings.*``; the
  Hub checkpoints and vLLM's loader use ``vision_tower.vision_model.embeddings.*``.
- vLLM's Gemma 3 processor looks up raw "\n" ... "\n\n\n\n" vocabulary entries.
- vLLM's GLM-4 MoE layers read ``use_qk_norm``, absent from transformers' config class.
- SmolVLM's processor needs the ``num2words`` package.
- The language model's head_dim must be 64 for the CPU attention backend.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import build_qwen2_5_vl, build_qwen2_vl

# ---------------------------------------------------------------------------------------------
# Shared pieces

# Tiny vision towers. 64 wide with 2 heads (head_dim 32): vLLM runs vision encoders through
# its own multi-head attention (torch SDPA on the CPU), which takes head_dim 32, unlike the
# paged attention of the language model (which needs 64, see TINY_TEXT).
_CLIP = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 56,
    "patch_size": 14,
    "projection_dim": 64,
}
_SIGLIP = {k: v for k, v in _CLIP.items() if k != "projection_dim"}


def _text(tokenizer: Any, **overrides: Any) -> dict[str, Any]:
    """A tiny language-model config (dict) whose vocab covers the tokenizer."""
    return {**TINY_TEXT, "vocab_size": padded_vocab_size(tokenizer), **overrides}


def _hub_vision_tower_names(name: str) -> str:
    """``vision_tower.X`` -> ``vision_tower.vision_model.X``, as in the Hub's CLIP/SigLIP towers."""
    prefix = "vision_tower."
    if name.startswith(prefix) and not name.startswith(prefix + "vision_model."):
        return prefix + "vision_model." + name[len(prefix) :]
    return name


# ---------------------------------------------------------------------------------------------
# LLaVA 1.5 / LLaVA-NeXT / LLaVA-OneVision

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
        vision_config={"model_type": "clip_vision_model", **_CLIP},
        text_config=_text(
            tokenizer, model_type="llama", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = _CLIP["image_size"]
    processor = tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        ),
        tokenizer=tokenizer,
        patch_size=_CLIP["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_TEMPLATE,
    )
    return finish(
        dest, tf.LlavaForConditionalGeneration, config, processor, rename=_hub_vision_tower_names
    )


def build_llava_next(dest: Path) -> TinyCheckpoint:
    """LLaVA-NeXT 1.6 Mistral (``LlavaNextForConditionalGeneration``: CLIP, any-res tiles)."""
    tf = transformers_module()

    tokenizer, ids = _sentencepiece_style_tokenizer(dest, _LLAVA_NEXT_TEMPLATE)
    config = tf.LlavaNextConfig(
        vision_config={"model_type": "clip_vision_model", **_CLIP},
        text_config=_text(
            tokenizer, model_type="mistral", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"]
        ),
        image_token_index=ids["<image>"],
        image_grid_pinpoints=_PINPOINTS,
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    size = _CLIP["image_size"]
    processor = tf.LlavaNextProcessor(
        image_processor=tf.LlavaNextImageProcessor(
            size={"shortest_edge": size},
            crop_size={"height": size, "width": size},
            image_grid_pinpoints=_PINPOINTS,
        ),
        tokenizer=tokenizer,
        patch_size=_CLIP["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_NEXT_TEMPLATE,
    )
    return finish(
        dest,
        tf.LlavaNextForConditionalGeneration,
        config,
        processor,
        rename=_hub_vision_tower_names,
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
        vision_config={"model_type": "siglip_vision_model", **_SIGLIP},
        text_config=_text(
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
    size = _SIGLIP["image_size"]
    processor = tf.LlavaOnevisionProcessor(
        image_processor=tf.LlavaOnevisionImageProcessor(
            size={"height": size, "width": size}, image_grid_pinpoints=_PINPOINTS
        ),
        video_processor=tf.LlavaOnevisionVideoProcessor(size={"height": size, "width": size}),
        tokenizer=tokenizer,
        num_image_tokens=(size // _SIGLIP["patch_size"]) ** 2,
        vision_feature_select_strategy="full",
        chat_template=_LLAVA_ONEVISION_TEMPLATE,
    )
    return finish(
        dest,
        tf.LlavaOnevisionForConditionalGeneration,
        config,
        processor,
        rename=_hub_vision_tower_names,
    )


# ---------------------------------------------------------------------------------------------
# Idefics3 / SmolVLM

# HuggingFaceM4/Idefics3-8B-Llama3 and HuggingFaceTB/SmolVLM2-2.2B-Instruct, chat_template.json.
_IDEFICS3_TEMPLATE = (
    "<|begin_of_text|>{% for message in messages %}{{message['role'].capitalize()}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
_SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}"
    "{% elif line['type'] == 'video' %}{{ '<video>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
# The tile grid markers of both processors (<row_1_col_1> ...), added tokens in the real
# tokenizers; 6 x 6 covers the largest split the seeds' image sizes produce.
_GRID_TOKENS = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]


def _idefics_like(
    dest: Path,
    *,
    smol: bool,
    tile: int,
    patch: int,
    longest_edge: int,
) -> TinyCheckpoint:
    tf = transformers_module()

    bos = "<|im_start|>" if smol else "<|begin_of_text|>"
    tokenizer = build_tokenizer(
        dest,
        [
            bos,
            "<|end_of_text|>",
            "<fake_token_around_image>",
            "<image>",
            "<end_of_utterance>",
            "<global-img>",
            "<video>",
        ],
        chat_template=_SMOLVLM_TEMPLATE if smol else _IDEFICS3_TEMPLATE,
        added_tokens=_GRID_TOKENS,
        # Llama 3's tokenizer (Idefics3) puts <|begin_of_text|> before every text; SmolVLM's not.
        prepend=None if smol else bos,
        bos_token=bos,
        eos_token="<end_of_utterance>" if smol else "<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    ids = token_ids(tokenizer, [bos, "<|end_of_text|>", "<image>", "<end_of_utterance>"])
    # A tile of the real size (the seeds' mm_processor_kwargs name it) cut into few big
    # patches: (tile // patch)**2 / scale**2 placeholder tokens per tile.
    scale = 2
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": tile,
        "patch_size": patch,
    }
    text = _text(
        tokenizer, model_type="llama", bos_token_id=ids[bos], eos_token_id=ids["<end_of_utterance>"]
    )
    image_seq_len = (tile // patch) ** 2 // scale**2
    config_class: Any
    if smol:
        config_class, model_class = tf.SmolVLMConfig, tf.SmolVLMForConditionalGeneration
        processor = tf.SmolVLMProcessor(
            image_processor=tf.SmolVLMImageProcessor(
                size={"longest_edge": longest_edge}, max_image_size={"longest_edge": tile}
            ),
            video_processor=tf.SmolVLMVideoProcessor(
                size={"longest_edge": tile}, max_image_size={"longest_edge": tile}
            ),
            tokenizer=tokenizer,
            image_seq_len=image_seq_len,
            chat_template=_SMOLVLM_TEMPLATE,
        )
    else:
        config_class, model_class = tf.Idefics3Config, tf.Idefics3ForConditionalGeneration
        processor = tf.Idefics3Processor(
            image_processor=tf.Idefics3ImageProcessor(
                size={"longest_edge": longest_edge}, max_image_size={"longest_edge": tile}
            ),
            tokenizer=tokenizer,
            image_seq_len=image_seq_len,
            chat_template=_IDEFICS3_TEMPLATE,
        )
    config = config_class(
        vision_config=vision,
        text_config=text,
        scale_factor=scale,
        image_token_id=ids["<image>"],
        pad_token_id=ids["<|end_of_text|>"],
    )
    return finish(dest, model_class, config, processor)


def build_idefics3(dest: Path) -> TinyCheckpoint:
    """Idefics3 (``Idefics3ForConditionalGeneration``): 364-pixel tiles as the real model."""
    return _idefics_like(dest, smol=False, tile=364, patch=91, longest_edge=4 * 364)


def build_smolvlm(dest: Path) -> TinyCheckpoint:
    """SmolVLM2 (``SmolVLMForConditionalGeneration``): 384-pixel tiles as the real model."""
    return _idefics_like(dest, smol=True, tile=384, patch=96, longest_edge=4 * 384)


# ---------------------------------------------------------------------------------------------
# Gemma 3

# google/gemma-3-4b-it, chat_template.json.
_GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""


def build_gemma3(dest: Path) -> TinyCheckpoint:
    """Gemma 3 (``Gemma3ForConditionalGeneration``: SigLIP pooled to mm_tokens_per_image)."""
    tf = transformers_module()

    tokenizer = build_tokenizer(
        dest,
        [
            "<pad>",
            "<eos>",
            "<bos>",
            "<unk>",
            "<start_of_turn>",
            "<end_of_turn>",
            "<start_of_image>",
            "<end_of_image>",
            "<image_soft_token>",
        ],
        chat_template=_GEMMA3_TEMPLATE,
        # Trap: vLLM's Gemma 3 processor looks up "\n" ... "\n\n\n\n" in the vocab (Gemma's
        # SentencePiece has raw newline pieces) to re-merge newlines around the image
        # sequence; a byte-level BPE spells them "Ċ", so they are added as whole tokens.
        added_tokens=["\n", "\n\n", "\n\n\n", "\n\n\n\n"],
        prepend="<bos>",
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        # Gemma3Processor reads these three from the tokenizer.
        boi_token="<start_of_image>",
        eoi_token="<end_of_image>",
        image_token="<image_soft_token>",
    )
    ids = token_ids(
        tokenizer,
        [
            "<pad>",
            "<eos>",
            "<bos>",
            "<end_of_turn>",
            "<start_of_image>",
            "<end_of_image>",
            "<image_soft_token>",
        ],
    )
    # 56 / 14 = 4 x 4 patches, average-pooled to 2 x 2 = 4 soft tokens per image.
    mm_tokens = 4
    text = _text(
        tokenizer,
        num_hidden_layers=2,  # one sliding-window layer and one global layer, as the real pattern
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=512,
        query_pre_attn_scalar=64,
        pad_token_id=ids["<pad>"],
        bos_token_id=ids["<bos>"],
        eos_token_id=[ids["<eos>"], ids["<end_of_turn>"]],
    )
    config = tf.Gemma3Config(
        text_config=text,
        vision_config={**_SIGLIP, "vision_use_head": False},
        mm_tokens_per_image=mm_tokens,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
    )
    size = _SIGLIP["image_size"]
    processor = tf.Gemma3Processor(
        image_processor=tf.Gemma3ImageProcessor(size={"height": size, "width": size}),
        tokenizer=tokenizer,
        image_seq_length=mm_tokens,
        chat_template=_GEMMA3_TEMPLATE,
    )
    return finish(
        dest, tf.Gemma3ForConditionalGeneration, config, processor, rename=_hub_vision_tower_names
    )


# ---------------------------------------------------------------------------------------------
# Mistral 3 / Pixtral (Hugging Face format)

# The template transformers' convert_mistral3_weights_to_hf.py writes (Mistral-Small-3.1 HF);
# it takes text parts as either "text" or "content". The seeds build these two prompts by hand
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
    text = _text(tokenizer, model_type="mistral", bos_token_id=ids["<s>"], eos_token_id=ids["</s>"])
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


# ---------------------------------------------------------------------------------------------
# Aria

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

    Trap (loader, not checkpoint): the seed's ``tokenizer_mode="slow"`` is rejected by vLLM
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
    text = _text(
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
    # vLLM refuses them, so the tiny run drops them. The golden and seed tests pin the ids.
    return dataclasses.replace(checkpoint, sampling_args={"stop_token_ids": []})


# ---------------------------------------------------------------------------------------------
# Llama 4


def build_llama4(dest: Path) -> TinyCheckpoint:
    """Llama 4 Scout (``Llama4ForConditionalGeneration``: tiled ViT, pixel shuffle, MoE text)."""
    tf = transformers_module()
    from transformers.models.llama4 import processing_llama4

    # The real Llama-4 template (with its tool-calling branches) is long; transformers ships
    # the Hub's text as the processor's default, which is used here rather than a copy.
    template = processing_llama4.chat_template
    specials = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|finetune_right_pad|>",
        "<|header_start|>",
        "<|header_end|>",
        "<|eot|>",
        "<|eom|>",
        "<|python_start|>",
        "<|python_end|>",
        "<|image_start|>",
        "<|image_end|>",
        "<|image|>",
        "<|patch|>",
        "<|tile_x_separator|>",
        "<|tile_y_separator|>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        chat_template=template,
        prepend="<|begin_of_text|>",
        bos_token="<|begin_of_text|>",
        eos_token="<|eot|>",
        pad_token="<|finetune_right_pad|>",
    )
    ids = token_ids(tokenizer, specials)
    # 336-pixel tiles as the real model, in 84-pixel patches: 4 x 4 patches, pixel-shuffled
    # (ratio 0.5) to 4 tokens per tile. The shuffle MLP takes hidden / ratio**2 = 256 inputs.
    vision = {
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 336,
        "patch_size": 84,
        "pixel_shuffle_ratio": 0.5,
        "projector_input_dim": 128,
        "projector_output_dim": 128,
        "vision_output_dim": 128,
    }
    text = _text(
        tokenizer,
        intermediate_size=128,
        intermediate_size_mlp=256,
        num_hidden_layers=2,
        num_local_experts=2,
        num_experts_per_tok=1,
        interleave_moe_layer_step=2,  # layer 0 dense, layer 1 MoE, as Maverick alternates
        bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=[ids["<|end_of_text|>"], ids["<|eot|>"]],
        pad_token_id=ids["<|finetune_right_pad|>"],
    )
    config = tf.Llama4Config(
        vision_config=vision,
        text_config=text,
        boi_token_index=ids["<|image_start|>"],
        eoi_token_index=ids["<|image_end|>"],
        image_token_index=ids["<|image|>"],
    )
    processor = tf.Llama4Processor(
        image_processor=tf.Llama4ImageProcessor(size={"height": 336, "width": 336}, max_patches=16),
        tokenizer=tokenizer,
        patch_size=84,
        pixel_shuffle_ratio=0.5,
        chat_template=template,
    )
    return finish(dest, tf.Llama4ForConditionalGeneration, config, processor)


# ---------------------------------------------------------------------------------------------
# GLM-4.5V

# zai-org's GLM-V chat template (GLM-4.5V, shared by GLM-OCR's published copy) without its
# tool-calling and reasoning-history branches, which the seed's single user turn never takes:
# "[gMASK]<sop><|user|>" then each image as <|begin_of_image|><|image|><|end_of_image|>
# on its own line, the text, and "<|assistant|>".
_GLM4V_TEMPLATE = """[gMASK]<sop>
{%- macro visible_text(content) -%}
    {%- if content is string -%}
        {{- content }}
    {%- elif content is iterable and content is not mapping -%}
        {%- for item in content -%}
            {%- if item is mapping and item.type == 'text' -%}
                {{- item.text }}
            {%- elif item is mapping and (item.type == 'image' or 'image' in item) -%}
                <|begin_of_image|><|image|><|end_of_image|>
            {%- elif item is mapping and (item.type == 'video' or 'video' in item) -%}
                <|begin_of_video|><|video|><|end_of_video|>
            {%- elif item is string -%}
                {{- item }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{- content }}
    {%- endif -%}
{%- endmacro -%}
{% for m in messages %}
{%- if m.role == 'user' -%}<|user|>
{% if m.content is string %}
{{ m.content }}
{%- else %}
{%- for item in m.content %}
{% if item.type == 'video' or 'video' in item %}
<|begin_of_video|><|video|><|end_of_video|>{% elif item.type == 'image' or 'image' in item %}
<|begin_of_image|><|image|><|end_of_image|>{% elif item.type == 'text' %}
{{ item.text }}
{%- endif %}
{%- endfor %}
{%- endif %}
{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not visible_text(m.content).endswith("/nothink")) else '' -}}
{%- elif m.role == 'assistant' -%}
<|assistant|>
{{ '\n<think></think>' }}
{%- set content = visible_text(m.content) %}
{%- if content.strip() -%}
{{ '\n' + content.strip() }}
{%- endif -%}
{%- elif m.role == 'system' -%}
<|system|>
{{ visible_text(m.content) }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|assistant|>
{{'<think></think>\n' if (enable_thinking is defined and not enable_thinking) else ''}}
{%- endif -%}
"""


# GLM-V's special tokens, which GLM-4.1V, GLM-4.5V and GLM-OCR share.
_GLM_V_SPECIALS = (
    "<|endoftext|>",
    "[gMASK]",
    "<sop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|video|>",
    "<think>",
    "</think>",
)
# A one-block GLM-V vision tower that feeds TINY_TEXT's hidden size.
GLM_V_VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "out_hidden_size": TINY_TEXT["hidden_size"],
}


def glm_v_tokenizer(dest: Path) -> tuple[Any, dict[str, int]]:
    """The tokenizer of the GLM-V checkpoints, with the GLM-V chat template, and its special
    tokens' ids."""
    tokenizer = build_tokenizer(
        dest,
        _GLM_V_SPECIALS,
        chat_template=_GLM4V_TEMPLATE,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    return tokenizer, token_ids(tokenizer, _GLM_V_SPECIALS)


def glm_v_media_ids(ids: dict[str, int]) -> dict[str, int]:
    """The media token ids a GLM-V config names."""
    return {
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "image_start_token_id": ids["<|begin_of_image|>"],
        "image_end_token_id": ids["<|end_of_image|>"],
        "video_start_token_id": ids["<|begin_of_video|>"],
        "video_end_token_id": ids["<|end_of_video|>"],
    }


def build_glm4_5v(dest: Path) -> TinyCheckpoint:
    """GLM-4.5V (``Glm4vMoeForConditionalGeneration``: Qwen2-VL-like tower, MoE text)."""
    tf = transformers_module()
    tokenizer, ids = glm_v_tokenizer(dest)
    # head_dim 64 with partial_rotary_factor 0.5: 32 rotary dims, mrope halves 4 + 6 + 6 = 16
    # (the real 8/12/12 is for head_dim 128).
    text = _text(
        tokenizer,
        num_hidden_layers=2,  # first_k_dense_replace=1: layer 0 dense, layer 1 MoE
        first_k_dense_replace=1,
        # Trap: vLLM's GLM-4 MoE layers read use_qk_norm, which the Hub's config.json carries
        # (false) but transformers' Glm4vMoeTextConfig does not define.
        use_qk_norm=False,
        moe_intermediate_size=64,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [4, 6, 6],
            "partial_rotary_factor": 0.5,
        },
        eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    config = tf.Glm4vMoeConfig(
        text_config=text,
        vision_config=GLM_V_VISION,
        **glm_v_media_ids(ids),
    )
    # 16 to 32 merged 28 x 28 patches per image (the real minimum is 112 x 112 pixels).
    pixels = {"shortest_edge": 112 * 112, "longest_edge": 32 * 28 * 28}
    processor = tf.Glm4vProcessor(
        image_processor=tf.Glm4vImageProcessor(size=pixels),
        video_processor=tf.Glm4vVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=_GLM4V_TEMPLATE,
    )
    return finish(dest, tf.Glm4vMoeForConditionalGeneration, config, processor)


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
    does it. The seed writes its prompt by hand and uses no chat template; none is saved (the
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


BUILDERS: dict[str, Builder] = {
    "qwen2_vl": build_qwen2_vl,
    "qwen2_5_vl": build_qwen2_5_vl,
    "llava": build_llava,
    "llava-next": build_llava_next,
    "llava-onevision": build_llava_onevision,
    "idefics3": build_idefics3,
    "smolvlm": build_smolvlm,
    "gemma3": build_gemma3,
    "mistral3": build_mistral3,
    "pixtral_hf": build_pixtral_hf,
    "aria": build_aria,
    "llama4": build_llama4,
    "glm4_5v": build_glm4_5v,
    # The FP8 row's prompt comes from the same processor and chat template as glm4_5v's; only
    # the weights differ (fp8 block quantisation, which vLLM's CPU backend cannot run). An
    # unquantised tiny checkpoint is therefore an honest proof of its prompt, not of FP8.
    "glm4_5v_fp8": build_glm4_5v,
    "step3": build_step3,
}

# Every other row of the image seed, with why it has no offline proof on vLLM 0.32.
UNPROVEN: dict[str, str] = {
    "phi4_multimodal": (
        "architecture removed from vLLM 0.32 (Phi4Multimodal, last in 0.12.0); no vLLM 0.12 "
        "environment (torch 2.9.1) nor tiny builder yet"
    ),
}
