"""Tiny offline checkpoints for more keys of vLLM's single-image and video example (see
tests/tiny/__init__.py): Qwen3.5 and Qwen3.5-MoE, Gemma 4, Gemma 3n (image), LFM2-VL.

Each writes the model's real config class with small sizes, a BPE tokenizer trained locally
with the model's real special tokens, and the model's real processor classes.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    save_random_weights,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny.extras import build_gemma3n
from tests.tiny.image import _text
from tests.tiny.vision import QWEN3_VISION, qwen3_checkpoint, qwen3_tokenizer

# ---------------------------------------------------------------------------------------------
# Qwen3.5


def build_qwen3_5(dest: Path) -> TinyCheckpoint:
    """Qwen3.5 (``Qwen3_5ForConditionalGeneration``): a hybrid text model (a Gated DeltaNet
    linear-attention layer, then a full-attention layer, as the real one alternates them),
    the Qwen3-VL vision tower, and the real Qwen3-VL image and video processors (Qwen3.5's
    processor classes are Qwen3-VL's).

    Stand-in chat template (for the chat method only): Qwen2-VL's, the same turns and
    placeholders; Qwen3.5's own adds tool calls and reasoning, and is not known offline.
    """
    return _qwen3_5(dest, moe=False)


def build_qwen3_5_moe(dest: Path) -> TinyCheckpoint:
    """Qwen3.5-MoE (``Qwen3_5MoeForConditionalGeneration``): Qwen3.5 with a mixture of experts
    and a shared expert in each text layer (4 experts, 2 per token here); the same stand-in
    template."""
    return _qwen3_5(dest, moe=True)


def _qwen3_5(dest: Path, *, moe: bool) -> TinyCheckpoint:
    tf = transformers_module()
    tokenizer, ids = qwen3_tokenizer(dest)
    # A quarter of each head is rotated (partial_rotary_factor 0.25, as in the real model):
    # the mrope_section halves sum to 64 * 0.25 / 2 = 8 (the real 11/11/10 is for head_dim 256).
    text = _text(
        tokenizer,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [3, 3, 2],
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        },
    )
    if moe:
        del text["intermediate_size"]
        text |= {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 128,
        }
        return qwen3_checkpoint(
            dest, tf.Qwen3_5MoeConfig, tf.Qwen3_5MoeForConditionalGeneration, text, QWEN3_VISION,
            ids, tokenizer, dummy_weights=True,
        )  # fmt: skip
    return qwen3_checkpoint(
        dest, tf.Qwen3_5Config, tf.Qwen3_5ForConditionalGeneration, text, QWEN3_VISION, ids,
        tokenizer,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Gemma 4

# Gemma 4's named tokens (the real tokenizer's strings; Gemma4Processor reads them by name).
_GEMMA4_TOKENS = {
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "pad_token": "<pad>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "image_token": "<|image|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
    "audio_token": "<|audio|>",
}
_GEMMA4_SPECIALS = ["<|video|>", "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>"]
# Stand-in chat template: the real one's turns (<|turn>role ... <turn|>) and media placeholders,
# without its system, tool and thinking parts.
_GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<|turn>' + role + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'text' %}{{ item['text'] | trim }}"
    "{% elif item['type'] == 'image' %}{{ '<|image|>' }}"
    "{% elif item['type'] == 'video' %}{{ '<|video|>' }}"
    "{% elif item['type'] == 'audio' %}{{ '<|audio|>' }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<turn|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|turn>model\n' }}{% endif %}"
)


def build_gemma4(dest: Path) -> TinyCheckpoint:
    """Gemma 4 (``Gemma4ForConditionalGeneration``, the 31B's layout: no audio tower): a
    sliding-window layer and a global one, the Gemma 4 vision tower (16-pixel patches pooled
    3x3), and the real Gemma 4 processor, image processor and video processor (70 soft
    tokens per image and per frame here; the real images take 280).

    Stand-in chat template (for the chat method only): the real turns and placeholders; the
    real template adds system, tool and thinking parts, and is not known offline.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _GEMMA4_SPECIALS,
        chat_template=_GEMMA4_TEMPLATE,
        prepend="<bos>",
        **_GEMMA4_TOKENS,
    )
    ids = token_ids(tokenizer, [*_GEMMA4_TOKENS.values(), *_GEMMA4_SPECIALS])
    text = _text(
        tokenizer,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=512,
        global_head_dim=64,  # the CPU attention kernels take 64 (the real global layers: 512)
        hidden_size_per_layer_input=0,
        pad_token_id=ids["<pad>"],
        bos_token_id=ids["<bos>"],
        eos_token_id=ids["<eos>"],
    )
    text["vocab_size_per_layer_input"] = text["vocab_size"]
    soft_tokens = 70
    config = tf.Gemma4Config(
        text_config=text,
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "default_output_length": soft_tokens,
        },
        boi_token_id=ids["<|image>"],
        eoi_token_id=ids["<image|>"],
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        boa_token_id=ids["<|audio>"],
        eoa_token_index=ids["<audio|>"],
        audio_token_id=ids["<|audio|>"],
    )
    processor = tf.Gemma4Processor(
        feature_extractor=tf.Gemma4AudioFeatureExtractor(),
        image_processor=tf.Gemma4ImageProcessor(max_soft_tokens=soft_tokens),
        video_processor=tf.Gemma4VideoProcessor(max_soft_tokens=soft_tokens),
        tokenizer=tokenizer,
        chat_template=_GEMMA4_TEMPLATE,
        image_seq_length=soft_tokens,
    )
    return finish(dest, tf.Gemma4ForConditionalGeneration, config, processor)


# ---------------------------------------------------------------------------------------------
# Gemma 3n (image)


def build_gemma3n_image(dest: Path) -> TinyCheckpoint:
    """Gemma 3n E2B for images: the audio row's checkpoint (tests/tiny/extras.py: the real
    Gemma 3n processor with its SigLIP image processor at 768 pixels, 256 image tokens) with
    real random weights, the MobileNetV5 tower's included (about 560 MB in bfloat16).

    Not vLLM's dummy weights: through the 300M-parameter tower they give all-zero image
    embeddings, and vLLM's AltUp rescales each embedding by its magnitude divided by
    max(magnitude, finfo.min), 0 / 0 for a zero vector, so every logit is NaN.
    """
    tf = transformers_module()
    build_gemma3n(dest)
    config = tf.Gemma3nConfig.from_pretrained(str(dest))
    save_random_weights(tf.Gemma3nForConditionalGeneration, config, dest, dtype="bfloat16")
    return TinyCheckpoint(dest, {**CPU_ARGS, "max_model_len": 2048})


# ---------------------------------------------------------------------------------------------
# LFM2-VL

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
    text = _text(
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
        dest, tf.Lfm2VlForConditionalGeneration, config, processor, rename=_hub_lfm2_vl_names
    )


def _hub_lfm2_vl_names(name: str) -> str:
    """``model.vision_tower.X`` -> ``model.vision_tower.vision_model.X``, as in the Hub's
    LFM2-VL checkpoints (vLLM's loader takes those names)."""
    prefix = "model.vision_tower."
    return prefix + "vision_model." + name[len(prefix) :] if name.startswith(prefix) else name


# A video row runs its image row's checkpoint (tests/e2e/test_video_e2e.py): the processor
# carries the real video processor.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "qwen3_5"): Proof(build_qwen3_5, standin="chat template"),
    ("video", "qwen3_5"): Proof(build_qwen3_5, standin="chat template"),
    ("image", "qwen3_5_moe"): Proof(build_qwen3_5_moe, standin="chat template"),
    ("video", "qwen3_5_moe"): Proof(build_qwen3_5_moe, standin="chat template"),
    ("image", "gemma4"): Proof(build_gemma4, standin="chat template"),
    ("video", "gemma4"): Proof(build_gemma4, standin="chat template"),
    # Not in CI: the real 300M-parameter MobileNetV5 tower at 768 pixels; its test_cli_e2e case
    # took 107-156 s on the shared 2-core machine (load average 5-10), the build of its 560 MB
    # of weights included.
    ("image", "gemma3n"): Proof(build_gemma3n_image, in_ci=False),
    ("image", "lfm2_vl"): Proof(build_lfm2_vl, standin="chat template", real_prompt=False),
}
