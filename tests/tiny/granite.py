"""Tiny checkpoints of IBM's Granite models (see tests/tiny/__init__.py): Granite Speech and
Granite Vision 4.1.

Granite Speech's vLLM module needs torchaudio (``make install`` installs it,
requirements/vllm-cpu.txt). Its encoder has a BatchNorm: vLLM's dummy loader fills its
running_var with U(-1e-3, 1e-3), which is negative in about half the channels and makes every
logit NaN, so the checkpoint carries real random weights (bfloat16, under 1 MB).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    TINY_TEXT,
    build_tokenizer,
    finish,
    padded_vocab_size,
    save_random_weights,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny._common import model_vision_tower_names, text_config

# ---------------------------------------------------------------------------------------------
# Granite Speech 3.3


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


_GRANITE_SPEECH_SPECIALS = ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|audio|>")


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
        _GRANITE_SPEECH_SPECIALS,
        bos_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    ids = token_ids(tok, _GRANITE_SPEECH_SPECIALS)
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


# ---------------------------------------------------------------------------------------------
# Granite Vision 4.1

# Granite's role and text markers, and the image placeholder (Granite4VisionProcessor's
# default, and the one vLLM's model names).
_GRANITE_VISION_SPECIALS = ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<image>")

# STAND-IN chat template: Granite's turns (<|start_of_role|>ROLE<|end_of_role|> CONTENT
# <|end_of_text|>), each image as <image> where the content puts it; the real template is not
# known offline.
_GRANITE_VISION_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|start_of_role|>' + message['role'] + '<|end_of_role|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end_of_text|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}"
)


def build_granite4_vision(dest: Path) -> TinyCheckpoint:
    """Granite Vision 4.1 (``Granite4VisionForConditionalGeneration``): a SigLIP tower whose
    features reach the Granite text model through window Q-Former projectors at several text
    layers (deepstack), the real Granite 4 Vision processor over the LLaVA-NeXT image
    processor it names (any-resolution tiles).

    The geometry is the real one shrunk: the real 384-pixel tiles of 16-pixel patches (24 x 24)
    with downsample rate 4/8 become 128-pixel tiles (8 x 8 patches, one 8 x 8 window, 4 x 4
    queries). The real model injects 4 vision layers and 4 spatial offset groups (vLLM and
    transformers always build the 4 spatial projectors), each at a text layer of its own:
    here one vision layer and the 4 groups, on 5 text layers.

    Stand-in chat template: see ``_GRANITE_VISION_TEMPLATE``.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _GRANITE_VISION_SPECIALS,
        chat_template=_GRANITE_VISION_TEMPLATE,
        bos_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, _GRANITE_VISION_SPECIALS)
    text = text_config(
        tokenizer,
        num_hidden_layers=5,
        bos_token_id=ids["<|end_of_text|>"],
        eos_token_id=ids["<|end_of_text|>"],
        pad_token_id=ids["<|end_of_text|>"],
    )
    del text["head_dim"]  # Granite derives it: hidden_size / num_attention_heads = 64
    tile, patch = 128, 16
    config = tf.Granite4VisionConfig(
        text_config=text,
        vision_config={
            "model_type": "siglip_vision_model",
            "hidden_size": 64,  # vLLM's Q-Former takes hidden_size / 64 heads
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": tile,
            "patch_size": patch,
            "vision_use_head": False,
        },
        image_token_index=ids["<image>"],
        vision_feature_select_strategy="full",  # SigLIP has no class token to drop
        image_grid_pinpoints=[[tile, tile], [tile, 2 * tile], [2 * tile, tile]],
        downsample_rate="4/8",
        deepstack_layer_map=[[-2, 0]],
        spatial_vision_layer=-1,
        spatial_target_layers=[1, 2, 3, 4],
    )
    image_processor = tf.LlavaNextImageProcessor(
        size={"shortest_edge": tile},
        crop_size={"height": tile, "width": tile},
        image_grid_pinpoints=config.image_grid_pinpoints,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    processor = tf.Granite4VisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="full",
        chat_template=_GRANITE_VISION_TEMPLATE,
        downsample_rate="4/8",
    )
    return finish(
        dest,
        tf.Granite4VisionForConditionalGeneration,
        config,
        processor,
        rename=model_vision_tower_names,
    )


PROOFS: dict[tuple[str, str], Proof] = {
    ("audio", "granite_speech"): Proof(build_granite_speech),
    # The image row's prompt comes from the stand-in chat template.
    ("image", "granite4_vision"): Proof(
        build_granite4_vision, standin="chat template", real_prompt=False
    ),
}
