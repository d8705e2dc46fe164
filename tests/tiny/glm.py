"""Tiny checkpoints of Zhipu's GLM models (see tests/tiny/__init__.py): GLM-4.5V (and its
FP8 row), GLM-4.1V-Thinking, GLM-OCR, GLM-4V and GLM-ASR.

Trap: vLLM's GLM-4 MoE layers read ``use_qk_norm``, absent from transformers' config class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    save_config,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import place_tokens, text_config, write_json

# ---------------------------------------------------------------------------------------------
# GLM-V: GLM-4.5V, GLM-4.1V-Thinking, GLM-OCR

# zai-org's GLM-V chat template (GLM-4.5V, shared by GLM-OCR's published copy) without its
# tool-calling and reasoning-history branches, which the example's single user turn never takes:
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
_GLM_V_VISION: dict[str, Any] = {
    "depth": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "out_hidden_size": TINY_TEXT["hidden_size"],
}


def _glm_v_tokenizer(dest: Path) -> tuple[Any, dict[str, int]]:
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


def _glm_v_media_ids(ids: dict[str, int]) -> dict[str, int]:
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
    tokenizer, ids = _glm_v_tokenizer(dest)
    # head_dim 64 with partial_rotary_factor 0.5: 32 rotary dims, mrope halves 4 + 6 + 6 = 16
    # (the real 8/12/12 is for head_dim 128).
    text = text_config(
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
        vision_config=_GLM_V_VISION,
        **_glm_v_media_ids(ids),
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


def build_glm4_1v(dest: Path) -> TinyCheckpoint:
    """GLM-4.1V-Thinking (``Glm4vForConditionalGeneration``: GLM-4.5V's tower, dense text).

    Stand-in template: GLM-4.5V's; GLM-4.1V-9B-Thinking's own is not known offline.
    """
    tf = transformers_module()
    tokenizer, ids = _glm_v_tokenizer(dest)
    text = text_config(
        tokenizer,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [4, 6, 6],
            "partial_rotary_factor": 0.5,
        },
        eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    config = tf.Glm4vConfig(
        text_config=text,
        vision_config=_GLM_V_VISION,
        **_glm_v_media_ids(ids),
    )
    pixels = {"shortest_edge": 112 * 112, "longest_edge": 32 * 28 * 28}
    processor = tf.Glm4vProcessor(
        image_processor=tf.Glm4vImageProcessor(size=pixels),
        video_processor=tf.Glm4vVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=_GLM4V_TEMPLATE,
    )
    return finish(dest, tf.Glm4vForConditionalGeneration, config, processor)


def build_glm_ocr(dest: Path) -> TinyCheckpoint:
    """GLM-OCR (``GlmOcrForConditionalGeneration``: GLM-4.1V's layout with a CogViT tower and a
    dense GLM text model), with the real GLM-4.6V processor, image processor and video
    processor that its checkpoint names, and the GLM-V chat template."""
    tf = transformers_module()
    tokenizer, ids = _glm_v_tokenizer(dest)
    # head_dim 64 with partial_rotary_factor 0.5: 32 rotary dims, mrope halves 4 + 6 + 6 = 16.
    text = text_config(
        tokenizer,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [4, 6, 6],
            "partial_rotary_factor": 0.5,
        },
        eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    config = tf.GlmOcrConfig(
        text_config=text,
        vision_config=_GLM_V_VISION,
        **_glm_v_media_ids(ids),
    )
    # 24 to 32 merged 28 x 28 patches per image (the budget counts an image as 2 frames). The
    # loader's mm_processor_kwargs (vLLM's example's budget) would otherwise let the tests'
    # small images make a dozen image tokens, fewer than the hand-written prompt's system turn
    # adds over the chat template's prompt: chat's prompt would not outnumber that text.
    pixels = {"shortest_edge": 2 * 24 * 28 * 28, "longest_edge": 2 * 32 * 28 * 28}
    processor = tf.Glm46VProcessor(
        image_processor=tf.Glm46VImageProcessor(size=pixels),
        video_processor=tf.Glm46VVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=_GLM4V_TEMPLATE,
    )
    return finish(
        dest,
        tf.GlmOcrForConditionalGeneration,
        config,
        processor,
        mm_processor_kwargs={"size": pixels, "fps": 1},
    )


# ---------------------------------------------------------------------------------------------
# GLM-4 family special tokens: GLM-ASR, GLM-4V

# GLM-4 family special tokens (GLM-ASR-Nano's tokenizer), audio ones included.
_GLM_SPECIALS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|pad|>",
)


# ---------------------------------------------------------------------------------------------
# GLM-ASR

# The chat template of zai-org/GLM-ASR-Nano-2512 in transformers format (from transformers'
# convert_glmasr_weights_to_hf.py).
_GLMASR_TEMPLATE = (
    "{%- macro to_text(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is iterable and content is not mapping -%}"
    "{%- for item in content -%}"
    "{%- if item is mapping and item.type == 'text' and item.text is defined -%}{{- item.text -}}"
    "{%- elif item is mapping and (item.type == 'audio' or 'audio' in item) -%}"
    "<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\n"
    "{% elif item is string -%}{{- item -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- else -%}{{- content -}}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>\n{{ to_text(m.content) | trim }}"
    "{%- elif m.role == 'user' -%}<|user|>\n{{ to_text(m.content) | trim }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>\n{{ to_text(m.content) | trim }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>\n{% endif -%}"
)


def build_glmasr(dest: Path) -> TinyCheckpoint:
    """GLM-ASR-Nano (``GlmAsrForConditionalGeneration``) with its chat template and processor
    in transformers format; config only."""
    tf = transformers_module()

    tok = build_tokenizer(
        dest,
        _GLM_SPECIALS,
        chat_template=_GLMASR_TEMPLATE,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _GLM_SPECIALS)
    config = tf.GlmAsrConfig(
        audio_config={
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_mel_bins": 128,
        },
        text_config={
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        },
        audio_token_id=ids["<|pad|>"],
    )
    save_config(config, dest, "GlmAsrForConditionalGeneration")
    # Trap: two audios in one prompt fail inside transformers' GlmAsrProcessor ("Got 1 text but
    # 2 audios; they must match 1:1"), although vLLM declares no limit: one audio per prompt.
    # max_audio_len: the real 655 s makes vLLM profile the encoder on 22 dummy 30 s windows
    # (~20 s more engine start on 2 cores); 60 s keeps the tiny run quick.
    tf.GlmAsrProcessor(
        tf.WhisperFeatureExtractor(feature_size=128),
        tok,
        chat_template=_GLMASR_TEMPLATE,
        max_audio_len=60,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 1024})


# ---------------------------------------------------------------------------------------------
# GLM-4V

# GLM-4's special tokens, in id order from 151329 (the real vocabulary's first special id): the
# GLM-4 family's list, up to its audio tokens.
_GLM4_SPECIALS = _GLM_SPECIALS[: _GLM_SPECIALS.index("<|begin_of_audio|>")]


def _glm4_tokenizer(dest: Path) -> dict[str, int]:
    """A STAND-IN for GLM-4's remote tokenizer (ChatGLM4Tokenizer, tiktoken): a locally trained
    byte-level BPE whose vocabulary is padded so that the special tokens keep their real ids
    (151329 on), which the loader's stop ids name; like the real one, it starts each encoded
    text with ``[gMASK]<sop>``. Returns the special tokens' ids."""
    from tokenizers.processors import TemplateProcessing

    placed = {151329 + i: token for i, token in enumerate(_GLM4_SPECIALS)}
    ids = {token: i for i, token in placed.items()}
    tokenizer = place_tokens(build_tokenizer(dest, []), placed, dest)
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="[gMASK] <sop> $A",
        special_tokens=[(t, ids[t]) for t in ("[gMASK]", "<sop>")],
    )
    tokenizer.eos_token = tokenizer.pad_token = "<|endoftext|>"
    tokenizer.save_pretrained(str(dest))
    return ids


def build_glm4v(dest: Path) -> TinyCheckpoint:
    """GLM-4V-9B (``ChatGLMModel`` with an EVA2-CLIP tower, run as ``GLM4VForCausalLM``): vLLM
    ships the config class (ChatGLMConfig, model type "chatglm") and the image processor; the
    tokenizer is a STAND-IN (:func:`_glm4_tokenizer`) for the remote ChatGLM4Tokenizer. The
    checkpoint carries no chat template (the real one is the remote tokenizer's)."""
    ids = _glm4_tokenizer(dest)
    patch, size = 14, 56
    vision = {
        "dropout_prob": 0.0,
        "hidden_act": "gelu",
        "in_channels": 3,
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "patch_size": patch,
        "num_heads": 2,
        "intermediate_size": 128,
        "layer_norm_eps": 1e-06,
        "num_positions": (size // patch) ** 2 + 1,
        "image_size": size,
        "scaling_factor": 8,
    }
    config = {
        "model_type": "chatglm",
        "architectures": ["ChatGLMModel"],
        "vision_config": vision,
        "add_bias_linear": False,
        "add_qkv_bias": True,
        "apply_query_key_layer_scaling": True,
        "apply_residual_connection_post_layernorm": False,
        "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True,
        "bias_dropout_fusion": True,
        "ffn_hidden_size": TINY_TEXT["intermediate_size"],
        "fp32_residual_connection": False,
        "hidden_dropout": 0.0,
        "hidden_size": TINY_TEXT["hidden_size"],
        "kv_channels": TINY_TEXT["head_dim"],
        "layernorm_epsilon": 1.5625e-07,
        "multi_query_attention": True,
        "multi_query_group_num": 1,
        "num_attention_heads": TINY_TEXT["num_attention_heads"],
        "num_layers": 1,
        "original_rope": True,
        "padded_vocab_size": 151552,  # the real size: the special tokens keep their ids
        "post_layer_norm": True,
        "rmsnorm": True,
        "seq_length": 2048,
        "tie_word_embeddings": False,
        "eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "boi_token_id": ids["<|begin_of_image|>"],
        "eoi_token_id": ids["<|end_of_image|>"],
    }
    write_json(dest / "config.json", config)
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy"})


# A video row runs its image row's checkpoint (tests/e2e/test_video_e2e.py): the processor
# carries the real video processor.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "glm4_5v"): Proof(build_glm4_5v),
    ("video", "glm4_5v"): Proof(build_glm4_5v),
    # The FP8 row's prompt comes from the same processor and chat template as glm4_5v's; only
    # the weights differ (fp8 block quantisation, which vLLM's CPU backend cannot run). An
    # unquantised tiny checkpoint is therefore an honest proof of its prompt, not of FP8.
    ("image", "glm4_5v_fp8"): Proof(build_glm4_5v),
    ("video", "glm4_5v_fp8"): Proof(build_glm4_5v),
    ("image", "glm4_1v"): Proof(build_glm4_1v),
    ("video", "glm4_1v"): Proof(build_glm4_1v),
    ("image", "glm_ocr"): Proof(build_glm_ocr),
    ("video", "glm_ocr"): Proof(build_glm_ocr),
    ("audio", "glmasr"): Proof(build_glmasr),
    # The stand-in tokenizer encodes the loader's prompt with the real special ids and prefix.
    ("image", "glm4v"): Proof(build_glm4v, standin="tokenizer"),
}
