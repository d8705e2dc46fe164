"""Tiny checkpoints of Microsoft's Phi models (see tests/tiny/__init__.py): Phi-3.5-vision,
Phi-4-multimodal and Phi-4-reasoning-vision, whose config and processor classes are remote
code: STAND-IN classes (tests/tiny/standins/phi3_v/, phi4_mm/, phi4_siglip/) written by this
project from what vLLM reads and calls. They prove vLLM's own multimodal processor, placeholder
expansion and model path; they do not prove the original classes.

Phi-4-multimodal (``Phi4MMForCausalLM``: a SigLIP tower, a conformer audio encoder and the
Phi-4-mini text model, with a vision and a speech LoRA adapter in subfolders of the model
repository) runs over transformers' Phi-4-multimodal image processor and feature extractor. It
proves the loaders' hand-written prompts and their LoRA adapters on the engine (vLLM's
processor, placeholder expansion, the towers, the text model with the adapter applied), not the
original classes or adapters.

Phi-4-reasoning-vision (``Phi4ForCausalLMV``: a SigLIP 2 NaFlex tower, a two-layer projector
and a Phi-3 text model) runs over transformers' SigLIP 2 image processor. It proves the
loader's hand-written prompt on the engine (vLLM's processor, placeholder expansion from the
image processor's patch grid, the tower, the text model), not the original classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, transformers_module
from tests.tiny import Proof
from tests.tiny._common import copy_standins, place_tokens, write_json

# ---------------------------------------------------------------------------------------------
# Phi-3.5-vision

# Phi-3.5-vision's special tokens at their ids; vLLM 0.32 hard-codes <|image|> = 32044.
_PHI3_TOKENS = {
    32000: "<|endoftext|>",
    32001: "<|assistant|>",
    32007: "<|end|>",
    32010: "<|user|>",
    32044: "<|image|>",
}


def build_phi3_v(dest: Path) -> TinyCheckpoint:
    """Phi-3.5-vision (``Phi3VForCausalLM``): STAND-IN config, processor and image processor
    classes; vLLM's own multimodal processor and model. vLLM builds the CLIP ViT-L/14-336
    tower from a hard-coded config (1024 wide, 336-pixel crops): ``layer_idx`` 0 keeps one of
    its layers. The vocabulary must reach the hard-coded image id (32064 embedding rows)."""
    tok = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>"],
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )
    tok = place_tokens(tok, _PHI3_TOKENS, dest)
    copy_standins("phi3_v", dest)
    config = {
        "architectures": ["Phi3VForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_phi3_v.Phi3VConfig",
            "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
        },
        "model_type": "phi3_v",
        **TINY_TEXT,
        "vocab_size": 32064,
        "bos_token_id": 1,
        "eos_token_id": 32000,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "embd_layer": {
            "embedding_cls": "image",
            "hd_transform_order": "sub_glb",
            "projection_cls": "mlp",
            "use_hd_transform": True,
            "with_learnable_separator": True,
        },
        "img_processor": {
            "image_dim_out": 1024,
            "model_name": "openai/clip-vit-large-patch14-336",
            "name": "clip_vision_model",
            "num_img_tokens": 144,
            "layer_idx": 0,
        },
    }
    write_json(dest / "config.json", config)
    auto_map = {
        "AutoImageProcessor": "image_processing_phi3_v.Phi3VImageProcessor",
        "AutoProcessor": "processing_phi3_v.Phi3VProcessor",
    }
    write_json(
        dest / "preprocessor_config.json",
        {
            "image_processor_type": "Phi3VImageProcessor",
            "processor_class": "Phi3VProcessor",
            "num_crops": 4,
            "auto_map": auto_map,
        },
    )
    write_json(
        dest / "processor_config.json",
        {
            "processor_class": "Phi3VProcessor",
            "auto_map": {"AutoProcessor": auto_map["AutoProcessor"]},
        },
    )
    return TinyCheckpoint(dest, {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096})


# ---------------------------------------------------------------------------------------------
# Phi-4-multimodal

# The loaders' turn tokens (mmrun/modalities/image/phi.py, mmrun/modalities/audio/phi.py) and
# their numbered media tags, tokens of their own here: vLLM finds each tag by the ids it
# encodes to, so a tag must encode alike alone and next to its neighbours.
_TAGS = tuple(f"<|{kind}_{i}|>" for kind in ("image", "audio") for i in range(1, 9))

_PHI4_MM_SPECIALS = ("<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", *_TAGS)

# vLLM expands each tag into these ids, which it hard-codes (<|endoftext10|> and
# <|endoftext11|> of the Phi-4 tokenizer).
_PLACEHOLDERS = {200010: "<|endoftext10|>", 200011: "<|endoftext11|>"}

# The Phi-4-multimodal vocabulary's size: embedding rows that reach the hard-coded ids.
_PHI4_MM_VOCAB_SIZE = 200064

# STAND-IN chat template (the real one is in the checkpoint's files, not known offline): the
# turns of the loaders' prompt, contents as strings (vLLM puts the numbered tags in them).
_PHI4_MM_TEMPLATE = (
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
    rows; its chat template is a STAND-IN (see ``_PHI4_MM_TEMPLATE``). The vision-lora and speech-lora
    subfolders hold small random PEFT adapters (rank 8; the real ones: 256 and 320)."""
    tf = transformers_module()
    copy_standins("phi4_mm", dest, "configuration_phi4mm.py", "processing_phi4mm.py")
    tok = build_tokenizer(
        dest,
        _PHI4_MM_SPECIALS,
        chat_template=_PHI4_MM_TEMPLATE,
        eos_token="<|end|>",
        pad_token="<|endoftext|>",
    )
    tok = place_tokens(tok, _PLACEHOLDERS, dest)
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
        "vocab_size": _PHI4_MM_VOCAB_SIZE,
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
    (dest / "chat_template.jinja").write_text(_PHI4_MM_TEMPLATE)
    intermediate = text["intermediate_size"]
    for folder in _ADAPTERS:
        _lora_adapter(dest / folder, hidden, kv_heads * head_dim, intermediate)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 4096}
    return TinyCheckpoint(dest, engine)


# ---------------------------------------------------------------------------------------------
# Phi-4-reasoning-vision

# The turn tokens of the loader's prompt (mmrun/modalities/image/phi.py) and its image
# placeholder, a token of its own here (vLLM matches the ids "<image>" encodes to, whatever
# their number).
_PHI4_SIGLIP_SPECIALS = ("<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<image>")

# vLLM's Phi4ForCausalLMV expands each "<image>" into this token, at the id it hard-codes
# (100256, the Phi-4 tokenizer's first reserved token).
_IMAGE_PAD = {100256: "<|dummy_0|>"}

# The Phi-4 vocabulary's size: the embedding rows that reach the hard-coded id.
_PHI4_SIGLIP_VOCAB_SIZE = 100352

# STAND-IN chat template (the real one is in the checkpoint's files, not known offline): the
# turns of the loader's prompt, each image part as <image> and a newline where the content
# puts it.
_PHI4_SIGLIP_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|end|>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_phi4_siglip(dest: Path) -> TinyCheckpoint:
    """Phi-4-reasoning-vision-15B (``Phi4ForCausalLMV``): a two-layer SigLIP 2 tower of width
    64 (vLLM runs it to its second-to-last layer, so one layer is built) and a one-layer
    Phi-3 text model (the real ones: a SigLIP 2 so400m NaFlex tower and Phi-4's 40 layers),
    random weights (``load_format="dummy"``).

    The geometry is the real one shrunk: 16-pixel patches, at most 64 patches per image (the
    real 3600) and at least 16 (the real 256), an 8 x 8 position table (the real 16 x 16),
    each image resized by the NaFlex processor to fit. The tokenizer is a generic one
    (byte-level BPE) carrying the loader's turn tokens and ``<image>``, with
    ``<|dummy_0|>`` placed at the id vLLM hard-codes and the Phi-4 vocabulary's size of
    embedding rows; its chat template is a STAND-IN (see ``_PHI4_SIGLIP_TEMPLATE``)."""
    tf = transformers_module()
    copy_standins("phi4_siglip", dest, "configuration_phi4_siglip.py", "processing_phi4_siglip.py")
    tok = build_tokenizer(
        dest,
        _PHI4_SIGLIP_SPECIALS,
        chat_template=_PHI4_SIGLIP_TEMPLATE,
        eos_token="<|end|>",
        pad_token="<|endoftext|>",
    )
    tok = place_tokens(tok, _IMAGE_PAD, dest)
    patch, width = 16, 64
    config: dict[str, Any] = {
        "architectures": ["Phi4ForCausalLMV"],
        "auto_map": {"AutoConfig": "configuration_phi4_siglip.Phi4SiglipConfig"},
        "model_type": "phi4_siglip",
        **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},  # Phi-3 derives it: 64
        "vocab_size": _PHI4_SIGLIP_VOCAB_SIZE,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0},
        "tie_word_embeddings": False,
        "bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
        "eos_token_id": tok.convert_tokens_to_ids("<|end|>"),
        "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
        "mm_hidden_size": width,
        "max_num_patches": 64,
        "min_num_patches": 16,
        "vision_config": {
            "hidden_size": width,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_channels": 3,
            "patch_size": patch,
            "num_patches": 64,
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    image_processor = tf.Siglip2ImageProcessor(patch_size=patch, max_num_patches=64)
    image_processor.save_pretrained(str(dest))
    preprocessor = dest / "preprocessor_config.json"
    settings = json.loads(preprocessor.read_text())
    settings["processor_class"] = "Phi4SiglipProcessor"
    settings["auto_map"] = {"AutoProcessor": "processing_phi4_siglip.Phi4SiglipProcessor"}
    preprocessor.write_text(json.dumps(settings, indent=2) + "\n")
    (dest / "chat_template.jinja").write_text(_PHI4_SIGLIP_TEMPLATE)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


# (modality, key) -> how each row is proven (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the loader's hand-written one (no chat template in the checkpoint); the
    # stand-in processor only sets how many placeholder tokens an image expands to.
    ("image", "phi3_v"): Proof(build_phi3_v, standin="config, processor classes"),
    # The generate prompts are the loaders' (written by hand, as vLLM's examples'); the image
    # row's chat runs the stand-in template, so that row is proven on the engine path (the
    # audio row has no chat path). The image processor and feature extractor are
    # transformers' Phi-4-multimodal classes, an assumption: the real checkpoint's are remote
    # code.
    ("image", "phi4_mm"): Proof(
        build_phi4_mm,
        standin="config and processor classes, image processor, LoRA adapter, chat template",
        real_prompt=False,
    ),
    ("audio", "phi4_mm"): Proof(
        build_phi4_mm, standin="config and processor classes, feature extractor, LoRA adapter"
    ),
    # The generate prompt is the loader's (written by hand, as vLLM's example's); chat runs
    # the stand-in template. The image processor is transformers' SigLIP 2 class, an
    # assumption: the real checkpoint's is not known offline.
    ("image", "phi4_siglip"): Proof(
        build_phi4_siglip, standin="config and processor classes, image processor, chat template"
    ),
}

UNPROVEN: dict[tuple[str, str], str] = {
    ("image", "phi4_multimodal"): (
        "architecture removed from vLLM 0.32 (Phi4Multimodal, last in 0.12.0); no vLLM 0.12 "
        "environment (torch 2.9.1) nor tiny builder yet"
    ),
}
