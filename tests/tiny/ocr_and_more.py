"""Tiny offline checkpoints for more keys of vLLM's single-image and video example: BLIP-2,
LightOnOCR and GLM-OCR (see tests/tiny/__init__.py and tools/upstream.py).

Their loaders write the prompt by hand, as that example does, so each checkpoint proves the
real prompt format by generate; the chat method renders a chat template: GLM-OCR's is the GLM-V
template that tests/tiny/image.py carries, LightOnOCR's a stand-in. BLIP-2 has no chat method.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    save_config,
    save_random_weights,
    token_ids,
    transformers_module,
)
from mmrun.tiny.qwen_vl import _QWEN_SPECIALS
from tests.tiny import Proof
from tests.tiny.image import (
    _GLM4V_TEMPLATE,
    GLM_V_VISION,
    _text,
    glm_v_media_ids,
    glm_v_tokenizer,
)

# ---------------------------------------------------------------------------------------------
# BLIP-2


def build_blip2(dest: Path) -> TinyCheckpoint:
    """BLIP-2 (``Blip2ForConditionalGeneration``: BLIP ViT, Q-Former, OPT), with the real
    BLIP image processor and BLIP-2 processor. OPT's tokenizer puts </s> before every text
    (the special tokens keep OPT's ids 0-3); vLLM puts the image's query tokens, as <image>
    placeholders, before the prompt."""
    tf = transformers_module()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<image>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        prepend="</s>",
        bos_token="</s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, specials)
    num_query_tokens = 8
    config = tf.Blip2Config(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 56,
            "patch_size": 14,
        },
        qformer_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "encoder_hidden_size": 64,
            "cross_attention_frequency": 1,
        },
        # OPT's head_dim is hidden_size / heads: 128 / 2 = 64.
        text_config={
            "model_type": "opt",
            "vocab_size": _text(tokenizer)["vocab_size"],
            "hidden_size": TINY_TEXT["hidden_size"],
            "ffn_dim": TINY_TEXT["intermediate_size"],
            "word_embed_proj_dim": TINY_TEXT["hidden_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 2048,
            "bos_token_id": ids["</s>"],
            "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"],
        },
        num_query_tokens=num_query_tokens,
        image_token_index=ids["<image>"],
    )
    processor = tf.Blip2Processor(
        image_processor=tf.BlipImageProcessor(size={"height": 56, "width": 56}),
        tokenizer=tokenizer,
        num_query_tokens=num_query_tokens,
    )
    return finish(dest, tf.Blip2ForConditionalGeneration, config, processor)


# ---------------------------------------------------------------------------------------------
# LightOnOCR

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
    text = _text(
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


# ---------------------------------------------------------------------------------------------
# GLM-OCR


def build_glm_ocr(dest: Path) -> TinyCheckpoint:
    """GLM-OCR (``GlmOcrForConditionalGeneration``: GLM-4.1V's layout with a CogViT tower and a
    dense GLM text model), with the real GLM-4.6V processor, image processor and video
    processor that its checkpoint names, and the GLM-V chat template (tests/tiny/image.py)."""
    tf = transformers_module()
    tokenizer, ids = glm_v_tokenizer(dest)
    # head_dim 64 with partial_rotary_factor 0.5: 32 rotary dims, mrope halves 4 + 6 + 6 = 16.
    text = _text(
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
        vision_config=GLM_V_VISION,
        **glm_v_media_ids(ids),
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


# GLM-OCR's video row runs the image row's checkpoint: its processor carries the real GLM-4.6V
# video processor.
PROOFS = {
    ("image", "blip-2"): Proof(build_blip2),
    ("image", "lightonocr"): Proof(build_lightonocr, standin="chat template"),
    ("image", "glm_ocr"): Proof(build_glm_ocr),
    ("video", "glm_ocr"): Proof(build_glm_ocr),
}
