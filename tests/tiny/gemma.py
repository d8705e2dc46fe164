"""Tiny checkpoints of Google's Gemma models (see tests/tiny/__init__.py): Gemma 3,
Gemma 3n (audio and image), Gemma 4, PaliGemma and PaliGemma 2.

Traps met while proving these on vLLM 0.32 / transformers 5 (also noted where they apply):
vLLM's Gemma 3 and PaliGemma processors look up raw "\n" ... "\n\n\n\n" vocabulary
entries; Gemma 3n's vision tower is the real one (vLLM builds it with timm, which
``make install`` installs, whatever the sizes).
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
    save_random_weights,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import SIGLIP, hub_vision_tower_names, text_config

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
    text = text_config(
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
        vision_config={**SIGLIP, "vision_use_head": False},
        mm_tokens_per_image=mm_tokens,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
    )
    size = SIGLIP["image_size"]
    processor = tf.Gemma3Processor(
        image_processor=tf.Gemma3ImageProcessor(size={"height": size, "width": size}),
        tokenizer=tokenizer,
        image_seq_length=mm_tokens,
        chat_template=_GEMMA3_TEMPLATE,
    )
    return finish(
        dest, tf.Gemma3ForConditionalGeneration, config, processor, rename=hub_vision_tower_names
    )


# ---------------------------------------------------------------------------------------------
# Gemma 3n

# Gemma 3n's named tokens (the real tokenizer's strings; Gemma3nProcessor reads them by name).
_GEMMA3N_TOKENS = {
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "pad_token": "<pad>",
    "boi_token": "<start_of_image>",
    "eoi_token": "<end_of_image>",
    "image_token": "<image_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
    "audio_token": "<audio_soft_token>",
}


def build_gemma3n(dest: Path) -> TinyCheckpoint:
    """Gemma 3n E2B (``Gemma3nForConditionalGeneration``): a 2-layer Gemma 3n text model, a
    1-layer conformer audio encoder, and the REAL vision tower: vLLM builds it with
    ``timm.create_model("mobilenetv5_300m_enc")`` whatever the sizes (about 300M parameters,
    even for audio-only prompts). Each clip becomes ``<start_of_audio>`` + 188 audio tokens +
    ``<end_of_audio>``, as in the real processor."""
    tf = transformers_module()
    # Runs of newlines are single tokens in Gemma's vocabulary, and vLLM looks them up by
    # their text ("\n" ... "\n\n\n\n") to split the "\n\n" around each clip's tokens.
    tok = build_tokenizer(
        dest,
        ["<start_of_turn>", "<end_of_turn>"],
        added_tokens=["\n" * n for n in range(4, 0, -1)],
        prepend="<bos>",
        **_GEMMA3N_TOKENS,
    )
    ids = token_ids(tok, list(_GEMMA3N_TOKENS.values()))
    # The real layout: the text ids, then 128 vision and 128 audio "hard" ids (vocab_size =
    # 262144 + 256). vLLM pads a short clip with the embedding of the last id through the
    # audio embedder (id - audio vocab_offset must fall in its 128 rows).
    text_ids = padded_vocab_size(tok)
    vocab = text_ids + 256
    layers = 2
    config = tf.Gemma3nConfig(
        text_config={
            "vocab_size": vocab,
            "vocab_size_per_layer_input": text_ids,
            "hidden_size": 128,
            "hidden_size_per_layer_input": 64,
            "intermediate_size": 256,
            "num_hidden_layers": layers,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 64,  # the CPU attention kernels reject small head sizes
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 512,
            "num_kv_shared_layers": 0,
            "activation_sparsity_pattern": [0.0] * layers,
            "altup_num_inputs": 2,
            "laurel_rank": 8,
            "max_position_embeddings": 4096,
            "pad_token_id": ids["<pad>"],
            "bos_token_id": ids["<bos>"],
            "eos_token_id": ids["<eos>"],
        },
        vision_config={"vocab_offset": text_ids},
        audio_config={
            "input_feat_size": 128,
            "hidden_size": 64,
            "conf_num_attention_heads": 2,
            "conf_num_hidden_layers": 1,
            "sscp_conv_channel_size": [16, 8],
            "vocab_offset": text_ids + 128,
        },
        boi_token_id=ids["<start_of_image>"],
        eoi_token_id=ids["<end_of_image>"],
        image_token_id=ids["<image_soft_token>"],
        boa_token_id=ids["<start_of_audio>"],
        eoa_token_id=ids["<end_of_audio>"],
        audio_token_id=ids["<audio_soft_token>"],
    )
    save_config(config, dest, "Gemma3nForConditionalGeneration")
    tf.Gemma3nProcessor(
        feature_extractor=tf.Gemma3nAudioFeatureExtractor(),
        image_processor=tf.SiglipImageProcessor(size={"height": 768, "width": 768}),
        tokenizer=tok,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 2048})


def build_gemma3n_image(dest: Path) -> TinyCheckpoint:
    """Gemma 3n E2B for images: the audio row's checkpoint (:func:`build_gemma3n`: the real
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
    text = text_config(
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
# PaliGemma


def build_paligemma(dest: Path) -> TinyCheckpoint:
    """PaliGemma (``PaliGemmaForConditionalGeneration``: SigLIP, a linear projection, Gemma),
    with the real PaliGemma processor (which prefixes the image tokens and <bos>)."""
    return _paligemma(dest, {"model_type": "gemma"})


def build_paligemma2(dest: Path) -> TinyCheckpoint:
    """PaliGemma 2 (the same architecture on Gemma 2: a sliding-window layer and a global
    one, soft-capped logits)."""
    return _paligemma(
        dest,
        {
            "model_type": "gemma2",
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 512,
            "query_pre_attn_scalar": 64,
        },
    )


def _paligemma(dest: Path, text_overrides: dict[str, Any]) -> TinyCheckpoint:
    tf = transformers_module()
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        # vLLM's PaliGemma processor looks up "\n" (a SentencePiece piece in Gemma's vocab) to
        # end the prompt; a byte-level BPE spells it "Ċ", so it is added as a whole token.
        added_tokens=["\n"],
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, specials)
    text = text_config(
        tokenizer,
        pad_token_id=ids["<pad>"],
        bos_token_id=ids["<bos>"],
        eos_token_id=ids["<eos>"],
    )
    vocab = text["vocab_size"]
    config = tf.PaliGemmaConfig(
        text_config={**text, **text_overrides},
        vision_config={**SIGLIP, "vision_use_head": False, "projection_dim": 128},
        image_token_index=ids["<image>"],
        vocab_size=vocab,
        projection_dim=TINY_TEXT["hidden_size"],
        hidden_size=TINY_TEXT["hidden_size"],
    )
    size = SIGLIP["image_size"]
    image_processor = tf.SiglipImageProcessor(size={"height": size, "width": size})
    # (56 / 14)^2 = 16 image tokens.
    image_processor.image_seq_length = (size // SIGLIP["patch_size"]) ** 2
    processor = tf.PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)
    return finish(
        dest,
        tf.PaliGemmaForConditionalGeneration,
        config,
        processor,
        rename=hub_vision_tower_names,
    )


# A video row runs its image row's checkpoint (tests/e2e/test_video_e2e.py): the processor
# carries the real video processor.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "gemma3"): Proof(build_gemma3),
    ("audio", "gemma3n"): Proof(build_gemma3n),
    # Not in CI: the real 300M-parameter MobileNetV5 tower at 768 pixels; its test_cli_e2e case
    # took 107-156 s on the shared 2-core machine (load average 5-10), the build of its 560 MB
    # of weights included.
    ("image", "gemma3n"): Proof(build_gemma3n_image, in_ci=False),
    ("image", "gemma4"): Proof(build_gemma4, standin="chat template"),
    ("video", "gemma4"): Proof(build_gemma4, standin="chat template"),
    ("image", "paligemma"): Proof(build_paligemma),
    ("image", "paligemma2"): Proof(build_paligemma2),
}
