"""Tiny checkpoint of Llama 4 Scout (see tests/tiny/__init__.py)."""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config


def build_llama4(dest: Path) -> TinyCheckpoint:
    """Llama 4 Scout (``Llama4ForConditionalGeneration``: tiled ViT, pixel shuffle, MoE text)."""
    tf = transformers_module()
    from transformers.models.llama4 import processing_llama4

    # The real Llama-4 template (with its tool-calling branches) is long; transformers ships
    # the Hub's text as the processor's default, which is used here rather than a copy.
    template = processing_llama4.chat_template
    specials = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|finetune_right_pad|>",
        "<|header_start|>",
        "<|header_end|>",
        "<|eot|>",
        "<|eom|>",
        "<|python_start|>",
        "<|python_end|>",
        "<|image_start|>",
        "<|image_end|>",
        "<|image|>",
        "<|patch|>",
        "<|tile_x_separator|>",
        "<|tile_y_separator|>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        chat_template=template,
        prepend="<|begin_of_text|>",
        bos_token="<|begin_of_text|>",
        eos_token="<|eot|>",
        pad_token="<|finetune_right_pad|>",
    )
    ids = token_ids(tokenizer, specials)
    # 336-pixel tiles as the real model, in 84-pixel patches: 4 x 4 patches, pixel-shuffled
    # (ratio 0.5) to 4 tokens per tile. The shuffle MLP takes hidden / ratio**2 = 256 inputs.
    vision = {
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 336,
        "patch_size": 84,
        "pixel_shuffle_ratio": 0.5,
        "projector_input_dim": 128,
        "projector_output_dim": 128,
        "vision_output_dim": 128,
    }
    text = text_config(
        tokenizer,
        intermediate_size=128,
        intermediate_size_mlp=256,
        num_hidden_layers=2,
        num_local_experts=2,
        num_experts_per_tok=1,
        interleave_moe_layer_step=2,  # layer 0 dense, layer 1 MoE, as Maverick alternates
        bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=[ids["<|end_of_text|>"], ids["<|eot|>"]],
        pad_token_id=ids["<|finetune_right_pad|>"],
    )
    config = tf.Llama4Config(
        vision_config=vision,
        text_config=text,
        boi_token_index=ids["<|image_start|>"],
        eoi_token_index=ids["<|image_end|>"],
        image_token_index=ids["<|image|>"],
    )
    processor = tf.Llama4Processor(
        image_processor=tf.Llama4ImageProcessor(size={"height": 336, "width": 336}, max_patches=16),
        tokenizer=tokenizer,
        patch_size=84,
        pixel_shuffle_ratio=0.5,
        chat_template=template,
    )
    return finish(dest, tf.Llama4ForConditionalGeneration, config, processor)


PROOFS: dict[tuple[str, str], Proof] = {("image", "llama4"): Proof(build_llama4)}
