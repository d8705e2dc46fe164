"""Tiny checkpoints of seed rows whose config or processor classes are remote code, with
STAND-IN classes (tests/tiny/standins/<model>/) written by this project from what vLLM 0.32
reads and calls. They prove vLLM's processor path, placeholder expansion and model, not the
original classes.

Each builder copies its stand-in files into the checkpoint folder and names them in
``auto_map``, as the model's Hub repository does, so the engine and the processor load them
with ``--trust-remote-code`` (which the end-to-end test passes), as a user's run does.
"""

from __future__ import annotations

import json
import shutil
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

_STANDINS = Path(__file__).resolve().parent / "standins"
# Config-only checkpoints: vLLM initialises random weights itself.
_ENGINE: dict[str, Any] = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}


def _standin(model: str, dest: Path, *names: str) -> None:
    """Copy stand-in remote code (tests/tiny/standins/<model>/) into the checkpoint folder."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(_STANDINS / model / name, dest / name)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# Keye-VL-8B-Preview

_KEYE_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)


# STAND-IN chat template (the checkpoint's own is in its Hub files): ChatML turns, each image
# or video part as the vision tokens vLLM's Keye-VL expands, then the text parts.
_KEYE_STANDIN = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_keye_vl(dest: Path) -> TinyCheckpoint:
    """Keye-VL-8B-Preview (``KeyeForConditionalGeneration``: a SigLIP tower with 2x2 patch
    merging, Qwen3 text, M-RoPE) with STAND-IN KeyeConfig, KeyeProcessor and image processor
    classes and chat template (tests/tiny/standins/). The tokenizer is trained locally, with
    the real special tokens."""
    _standin(
        "keye_vl",
        dest,
        "configuration_keye.py",
        "image_processing_keye.py",
        "processing_keye.py",
    )
    template = _KEYE_STANDIN
    (dest / "chat_template.jinja").write_text(template)
    tok = build_tokenizer(
        dest,
        _KEYE_SPECIALS,
        chat_template=template,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _KEYE_SPECIALS)
    patch = 14
    config = {
        "architectures": ["KeyeForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_keye.KeyeConfig"},
        "model_type": "Keye",
        **TINY_TEXT,
        "vocab_size": padded_vocab_size(tok),
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": False,
        "vision_config": {
            "auto_map": {"AutoConfig": "configuration_keye.KeyeVisionConfig"},
            "model_type": "siglip_vision_model",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 4 * patch,
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "tokens_per_second": 2,
        },
        # mrope_section halves sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
    }
    _write_json(dest / "config.json", config)
    # The real preprocessor settings with smaller images: at most 16 merged 28x28 patches.
    merged = 2 * patch
    _write_json(
        dest / "preprocessor_config.json",
        {
            "min_pixels": 4 * merged * merged,
            "max_pixels": 16 * merged * merged,
            "patch_size": patch,
            "temporal_patch_size": 1,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "processor_class": "KeyeProcessor",
            "auto_map": {
                "AutoProcessor": "processing_keye.KeyeProcessor",
                "AutoImageProcessor": "image_processing_keye.SiglipImageProcessor",
            },
        },
    )
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Ultravox v0.5

# STAND-IN chat template: Llama 3's turns without its system preamble (the checkpoint's own
# template, in its tokenizer files, is not public outside the Hub).
_LLAMA3_STANDIN = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
_LLAMA3_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|audio|>",
)


def build_ultravox(dest: Path) -> TinyCheckpoint:
    """Ultravox v0.5 (``UltravoxModel``: a Whisper encoder, stacked frames projected into a
    Llama text model) with STAND-IN UltravoxConfig and UltravoxProcessor classes
    (tests/tiny/standins/). The audio config names the folder of the Whisper feature
    extractor (the real checkpoint names openai/whisper-large-v3-turbo); vLLM reads the
    config with its own UltravoxConfig, transformers with the stand-in. The tokenizer is
    trained locally with Llama 3's special tokens and ``<|audio|>`` (the real tokenizer's
    added token, at ``audio_token_index``); the chat template is a STAND-IN."""
    from mmrun.tiny.whisper import TINY_WHISPER_ENCODER

    tf = transformers_module()
    model = "ultravox"
    _standin(model, dest, "ultravox_config.py", "ultravox_processing.py")
    # The feature extractor alone in its folder: AutoProcessor then loads a feature extractor
    # (a WhisperProcessor beside a Whisper config.json), the only ``audio_processor`` that
    # transformers 5 accepts. The processor finds the folder by the audio config's name.
    features = dest / "whisper"
    # 5-second chunks: vLLM profiles Ultravox with 16 chunks' worth of audio.
    tf.WhisperFeatureExtractor(feature_size=80, chunk_length=5).save_pretrained(str(features))
    tok = build_tokenizer(
        dest,
        _LLAMA3_SPECIALS,
        chat_template=_LLAMA3_STANDIN,
        prepend="<|begin_of_text|>",
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
    )
    ids = token_ids(tok, _LLAMA3_SPECIALS)
    text = {
        **TINY_TEXT,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": padded_vocab_size(tok),
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": ids["<|eot_id|>"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
    }
    config = {
        "architectures": ["UltravoxModel"],
        "auto_map": {
            "AutoConfig": "ultravox_config.UltravoxConfig",
            "AutoProcessor": "ultravox_processing.UltravoxProcessor",
        },
        "model_type": "ultravox",
        "audio_config": {
            "model_type": "whisper",
            "_name_or_path": str(features),
            "num_mel_bins": 80,
            **TINY_WHISPER_ENCODER,
        },
        "text_config": text,
        "audio_token_index": ids["<|audio|>"],
        "hidden_size": 4 * TINY_WHISPER_ENCODER["d_model"],
        "stack_factor": 8,
        "projector_act": "swiglu",
        "projector_ln_mid": True,
        "norm_init": 0.4,
        "vocab_size": text["vocab_size"],
    }
    _write_json(dest / "config.json", config)
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# MiDashengLM

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
    over a Wav2Vec2 feature extractor; vLLM ships the config class. The seed's prompt is
    hand-written ChatML, so no chat template is involved."""
    tf = transformers_module()
    _standin("midashenglm", dest, "processing_midashenglm.py")
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
    _write_json(dest / "config.json", config)
    _save_midashenglm_weights(config, dest)
    tf.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, do_normalize=False, return_attention_mask=True
    ).save_pretrained(str(dest))
    preprocessor = json.loads((dest / "preprocessor_config.json").read_text())
    preprocessor |= {
        "processor_class": "MiDashengLMProcessor",
        "auto_map": {"AutoProcessor": "processing_midashenglm.MiDashengLMProcessor"},
    }
    _write_json(dest / "preprocessor_config.json", preprocessor)
    return TinyCheckpoint(dest, {"max_num_seqs": 2, "max_model_len": 2048})


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "keye_vl"): Proof(
        build_keye_vl,
        standin="config, processor and image processor classes, chat template",
        real_prompt=False,
    ),
    # The video loader's prompt is hand-written (no chat template); tests/e2e/test_video_e2e.py.
    ("video", "keye_vl"): Proof(
        build_keye_vl, standin="config, processor and image processor classes"
    ),
    ("audio", "midashenglm"): Proof(build_midashenglm, standin="processor class"),
    ("audio", "ultravox"): Proof(
        build_ultravox, standin="config and processor classes, chat template", real_prompt=False
    ),
}
