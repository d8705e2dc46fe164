"""Tiny checkpoint of MiDashengLM (see tests/tiny/__init__.py), whose processor class is
remote code: a STAND-IN (tests/tiny/standins/midashenglm/) written by this project from what
vLLM 0.32 reads and calls, copied into the folder and named in ``auto_map`` as the Hub
repository does. It proves vLLM's processor path, placeholder expansion and model, not the
original class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    TINY_TEXT,
    build_tokenizer,
    padded_vocab_size,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import copy_standins, write_json

_MIDASHENG_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|audio_bos|>",
    "<|AUDIO|>",
    "<|audio_eos|>",
)


def _midashenglm_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The parameters vLLM 0.32's MiDashengLMModel loads (``audio_encoder.*``,
    ``audio_projector.*``, ``decoder.*`` as Qwen2ForCausalLM's), with their shapes, plus the
    encoder's BatchNorm statistics (buffers it would otherwise leave at their defaults)."""
    enc, text = config["audio_encoder_config"], config["text_config"]
    width, mels = enc["embed_dim"], enc["n_mels"]
    patch_f, patch_t = enc["patch_size"]
    hidden, inner = text["hidden_size"], text["intermediate_size"]
    head_dim = hidden // text["num_attention_heads"]
    kv = text["num_key_value_heads"] * head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "audio_encoder.init_bn.weight": (mels,),
        "audio_encoder.init_bn.bias": (mels,),
        "audio_encoder.init_bn.running_mean": (mels,),
        "audio_encoder.init_bn.running_var": (mels,),
        "audio_encoder.patch_embed.proj.weight": (width, 1, patch_f, patch_t),
        "audio_encoder.patch_embed.proj.bias": (width,),
        "audio_encoder.time_pos_embed": (1, width, 1, enc["target_length"] // patch_t),
        "audio_encoder.freq_pos_embed": (1, width, mels // patch_f, 1),
        "audio_encoder.norm.weight": (width,),
        "audio_encoder.norm.bias": (width,),
        "audio_projector.net.0.weight": (hidden, width * config["subsample_factor"]),
        "audio_projector.net.0.bias": (hidden,),
        "audio_projector.net.2.weight": (hidden, hidden),
        "audio_projector.net.2.bias": (hidden,),
        "decoder.model.embed_tokens.weight": (text["vocab_size"], hidden),
        "decoder.model.norm.weight": (hidden,),
        "decoder.lm_head.weight": (text["vocab_size"], hidden),
    }
    for i in range(enc["depth"]):
        block = f"audio_encoder.blocks.{i}"
        ff = int(width * enc["mlp_ratio"])
        for name, shape in {
            "norm1": (width,),
            "norm2": (width,),
            "attn.qkv": (3 * width, width),
            "attn.proj": (width, width),
            "mlp.fc1": (ff, width),
            "mlp.fc2": (width, ff),
        }.items():
            shapes[f"{block}.{name}.weight"] = shape
            shapes[f"{block}.{name}.bias"] = (shape[0],)
    for i in range(text["num_hidden_layers"]):
        layer = f"decoder.model.layers.{i}"
        for name, shape in {
            "self_attn.q_proj": (hidden, hidden),
            "self_attn.k_proj": (kv, hidden),
            "self_attn.v_proj": (kv, hidden),
        }.items():
            shapes[f"{layer}.{name}.weight"] = shape
            shapes[f"{layer}.{name}.bias"] = (shape[0],)
        shapes[f"{layer}.self_attn.o_proj.weight"] = (hidden, hidden)
        shapes[f"{layer}.mlp.gate_proj.weight"] = (inner, hidden)
        shapes[f"{layer}.mlp.up_proj.weight"] = (inner, hidden)
        shapes[f"{layer}.mlp.down_proj.weight"] = (hidden, inner)
        shapes[f"{layer}.input_layernorm.weight"] = (hidden,)
        shapes[f"{layer}.post_attention_layernorm.weight"] = (hidden,)
    return shapes


def _save_midashenglm_weights(config: dict[str, Any], dest: Path) -> None:
    """Random bfloat16 weights: normal(0, 0.02); norms' weight 1 and bias 0; BatchNorm
    running_mean 0 and running_var 1. Not load_format="dummy": that fills the encoder
    BatchNorm's running_var with U(-1e-3, 1e-3), negative in about half the channels, which
    makes the audio features, and so every logit, NaN."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, shape in _midashenglm_shapes(config).items():
        norm = any(
            part.startswith(("norm", "init_bn")) or part.endswith("layernorm")
            for part in name.split(".")[:-1]
        )
        if name.endswith("running_var") or (norm and name.endswith(".weight")):
            tensor = torch.ones(shape)
        elif name.endswith("running_mean") or norm:
            tensor = torch.zeros(shape)
        else:
            tensor = 0.02 * torch.randn(shape, generator=generator)
        tensors[name] = tensor.to(torch.bfloat16)
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})


def build_midashenglm(dest: Path) -> TinyCheckpoint:
    """MiDashengLM-7B (``MiDashengLMModel``: the Dasheng audio encoder, a subsampling projector,
    Qwen2.5-Omni's text model) with a STAND-IN MiDashengLMProcessor (tests/tiny/standins/)
    over a Wav2Vec2 feature extractor; vLLM ships the config class. The example's prompt is
    hand-written ChatML, so no chat template is involved."""
    tf = transformers_module()
    copy_standins("midashenglm", dest, "processing_midashenglm.py")
    named = {
        "audio_token": "<|AUDIO|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
    }
    tok = build_tokenizer(
        dest,
        _MIDASHENG_SPECIALS,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, _MIDASHENG_SPECIALS)
    config: dict[str, Any] = {
        "architectures": ["MiDashengLMModel"],
        "model_type": "midashenglm",
        "audio_token_id": ids["<|AUDIO|>"],
        "subsample_factor": 5,
        "audio_encoder_config": {
            "embed_dim": 64,
            "depth": 1,
            "num_heads": 2,
            "mlp_ratio": 2.0,
            # The real geometry: patches span all 64 mel bins and 4 frames (vLLM splits
            # the input by target_length // 4 patches).
            "patch_size": [64, 4],
            "patch_stride": [64, 4],
            "target_length": 1008,
            "n_mels": 64,
            "qkv_bias": True,
        },
        "text_config": {
            **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},
            "model_type": "qwen2_5_omni_text",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "tie_word_embeddings": False,
        },
    }
    write_json(dest / "config.json", config)
    _save_midashenglm_weights(config, dest)
    tf.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, do_normalize=False, return_attention_mask=True
    ).save_pretrained(str(dest))
    preprocessor = json.loads((dest / "preprocessor_config.json").read_text())
    preprocessor |= {
        "processor_class": "MiDashengLMProcessor",
        "auto_map": {"AutoProcessor": "processing_midashenglm.MiDashengLMProcessor"},
    }
    write_json(dest / "preprocessor_config.json", preprocessor)
    return TinyCheckpoint(dest, {"max_num_seqs": 2, "max_model_len": 2048})


PROOFS: dict[tuple[str, str], Proof] = {
    ("audio", "midashenglm"): Proof(build_midashenglm, standin="processor class"),
}
