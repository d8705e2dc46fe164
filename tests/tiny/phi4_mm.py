"""Tiny checkpoint of Phi-4-multimodal (``Phi4MMForCausalLM``: a SigLIP tower, a conformer
audio encoder and the Phi-4-mini text model, with a vision and a speech LoRA adapter in
subfolders of the model repository), whose config and processor classes are remote code:
STAND-IN config and processor classes (tests/tiny/standins/phi4_mm/) written from what vLLM
reads and calls, over transformers' Phi-4-multimodal image processor and feature extractor.
It proves the loaders' hand-written prompts and their LoRA adapters on the engine (vLLM's
processor, placeholder expansion, the towers, the text model with the adapter applied), not
the original classes or adapters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, transformers_module
from tests.tiny import Proof
from tests.tiny.standin import _place_tokens

_STANDINS = Path(__file__).resolve().parent / "standins" / "phi4_mm"

# The loaders' turn tokens (mmrun/modalities/image/phi.py, mmrun/modalities/audio/phi.py) and
# their numbered media tags, tokens of their own here: vLLM finds each tag by the ids it
# encodes to, so a tag must encode alike alone and next to its neighbours.
_TAGS = tuple(f"<|{kind}_{i}|>" for kind in ("image", "audio") for i in range(1, 9))
_SPECIALS = ("<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", *_TAGS)
# vLLM expands each tag into these ids, which it hard-codes (<|endoftext10|> and
# <|endoftext11|> of the Phi-4 tokenizer).
_PLACEHOLDERS = {200010: "<|endoftext10|>", 200011: "<|endoftext11|>"}
# The Phi-4-multimodal vocabulary's size: embedding rows that reach the hard-coded ids.
_VOCAB_SIZE = 200064
# STAND-IN chat template (the real one is in the checkpoint's files, not known offline): the
# turns of the loaders' prompt, contents as strings (vLLM puts the numbered tags in them).
_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + "
    "'<|end|>' }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# The LoRA adapters the loaders name, each in its subfolder of the model folder.
_ADAPTERS = ("vision-lora", "speech-lora")


def _lora_adapter(dest: Path, hidden: int, kv: int, intermediate: int, rank: int = 8) -> None:
    """A PEFT LoRA adapter with random weights in dest (adapter_config.json and
    adapter_model.safetensors) on the text model's fused projections, the modules vLLM's
    Phi-4-multimodal takes LoRA on (qkv_proj, o_proj, gate_up_proj, down_proj)."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    widths = {
        "self_attn.qkv_proj": (hidden, hidden + 2 * kv),
        "self_attn.o_proj": (hidden, hidden),
        "mlp.gate_up_proj": (hidden, 2 * intermediate),
        "mlp.down_proj": (intermediate, hidden),
    }
    tensors = {}
    for module, (width_in, width_out) in widths.items():
        name = f"base_model.model.model.layers.0.{module}"
        tensors[f"{name}.lora_A.weight"] = 0.01 * torch.randn(rank, width_in)
        tensors[f"{name}.lora_B.weight"] = 0.01 * torch.randn(width_out, rank)
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(module.split(".")[-1] for module in widths),
    }
    (dest / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build_phi4_mm(dest: Path) -> TinyCheckpoint:
    """Phi-4-multimodal-instruct (``Phi4MMForCausalLM``): a one-layer Phi-4-mini text model of
    width 128 (the real one: 32 layers of 3072) with its partial rotary embedding (0.75) and
    LongRoPE scaling, a one-block conformer audio encoder of width 64 (the real one: 24 blocks
    of 1024) with the real 8x time reduction and 80 mel bins, and random weights
    (``load_format="dummy"``). vLLM builds the SigLIP so400m vision tower from a hard-coded
    config (26 of its layers, 1152 wide, 448-pixel crops): it is the real size.

    The tokenizer is a generic one (byte-level BPE) carrying the loaders' turn tokens and tags,
    with the hard-coded placeholder ids placed and the real vocabulary's size of embedding
    rows; its chat template is a STAND-IN (see ``_TEMPLATE``). The vision-lora and speech-lora
    subfolders hold small random PEFT adapters (rank 8; the real ones: 256 and 320)."""
    tf = transformers_module()
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("configuration_phi4mm.py", "processing_phi4mm.py"):
        shutil.copy(_STANDINS / name, dest / name)
    tok = build_tokenizer(
        dest, _SPECIALS, chat_template=_TEMPLATE, eos_token="<|end|>", pad_token="<|endoftext|>"
    )
    tok = _place_tokens(tok, _PLACEHOLDERS, dest)
    text = {k: v for k, v in TINY_TEXT.items() if k != "head_dim"}  # Phi-3 derives it: 64
    hidden, heads, kv_heads = text["hidden_size"], text["num_attention_heads"], 1
    head_dim = hidden // heads
    rotary_half = int(head_dim * 0.75) // 2
    width = 64
    config: dict[str, Any] = {
        "architectures": ["Phi4MMForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_phi4mm.Phi4MMConfig",
            "AutoProcessor": "processing_phi4mm.Phi4MMProcessor",
        },
        "model_type": "phi4mm",
        **text,
        "num_key_value_heads": kv_heads,
        "vocab_size": _VOCAB_SIZE,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "partial_rotary_factor": 0.75,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": [1.0] * rotary_half,
            "long_factor": [1.0] * rotary_half,
        },
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
        "eos_token_id": tok.convert_tokens_to_ids("<|end|>"),
        "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
        "img_processor": None,
        "embd_layer": {
            "embedding_cls": "image_audio",
            "image_embd_layer": {"crop_size": 448, "embedding_cls": "tune_image"},
            "audio_embd_layer": {
                "embedding_cls": "audio",
                "compression_rate": 8,
                "downsample_rate": 1,
                "projection_cls": "mlp",
                "use_conv_downsample": False,
                "use_qformer": False,
            },
        },
        "audio_processor": {
            "name": "cascades",
            "config": {
                "input_size": 80,
                "encoder_embedding_config": {"input_size": 80},
                "attention_dim": width,
                "attention_heads": 2,
                "linear_units": 2 * width,
                "num_blocks": 1,
                "chunk_size": -1,
                "left_chunk": 18,
                "time_reduction": 8,
                "input_layer": "nemo_conv",
                "nemo_conv_settings": {"conv_channels": width},
                "depthwise_seperable_out_channel": width,
                "ext_pw_out_channel": width,
                "ext_pw_kernel_size": 1,
                "depthwise_multiplier": 1,
                "kernel_size": 3,
                "activation": "swish",
                "conv_activation": "swish",
                "conv_glu_type": "swish",
                "bias_in_glu": True,
                "batch_norm": False,
                "cnn_layer_norm": True,
                "causal": True,
                "dropout_rate": 0.0,
                "relative_attention_bias_args": {"type": "t5", "t5_bias_max_distance": 500},
            },
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    processor_config = {
        "processor_class": "Phi4MMProcessor",
        "auto_map": {"AutoProcessor": "processing_phi4mm.Phi4MMProcessor"},
        "image_processor": {
            **tf.Phi4MultimodalImageProcessor().to_dict(),
            "image_processor_type": "Phi4MultimodalImageProcessor",
        },
        "audio_processor": {
            **tf.Phi4MultimodalFeatureExtractor().to_dict(),
            "feature_extractor_type": "Phi4MultimodalFeatureExtractor",
        },
    }
    (dest / "processor_config.json").write_text(json.dumps(processor_config, indent=2) + "\n")
    (dest / "chat_template.jinja").write_text(_TEMPLATE)
    intermediate = text["intermediate_size"]
    for folder in _ADAPTERS:
        _lora_adapter(dest / folder, hidden, kv_heads * head_dim, intermediate)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096}
    return TinyCheckpoint(dest, engine)


# The generate prompts are the loaders' (written by hand, as vLLM's examples'); the image row's
# chat runs the stand-in template, so that row is proven on the engine path (the audio row
# has no chat path). The image
# processor and feature extractor are transformers' Phi-4-multimodal classes, an assumption:
# the real checkpoint's are remote code.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "phi4_mm"): Proof(
        build_phi4_mm,
        standin="config and processor classes, image processor, LoRA adapter, chat template",
        real_prompt=False,
    ),
    ("audio", "phi4_mm"): Proof(
        build_phi4_mm, standin="config and processor classes, feature extractor, LoRA adapter"
    ),
}
