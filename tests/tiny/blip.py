"""Tiny checkpoint of BLIP-2 (see tests/tiny/__init__.py). Its loader writes the prompt by
hand, as vLLM's single-image and video example does, so the checkpoint proves the real prompt
format by generate; BLIP-2 has no chat method.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config


def build_blip2(dest: Path) -> TinyCheckpoint:
    """BLIP-2 (``Blip2ForConditionalGeneration``: BLIP ViT, Q-Former, OPT), with the real
    BLIP image processor and BLIP-2 processor. OPT's tokenizer puts </s> before every text
    (the special tokens keep OPT's ids 0-3); vLLM puts the image's query tokens, as <image>
    placeholders, before the prompt."""
    tf = transformers_module()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<image>"]
    tokenizer = build_tokenizer(
        dest,
        specials,
        prepend="</s>",
        bos_token="</s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, specials)
    num_query_tokens = 8
    config = tf.Blip2Config(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 56,
            "patch_size": 14,
        },
        qformer_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "encoder_hidden_size": 64,
            "cross_attention_frequency": 1,
        },
        # OPT's head_dim is hidden_size / heads: 128 / 2 = 64.
        text_config={
            "model_type": "opt",
            "vocab_size": text_config(tokenizer)["vocab_size"],
            "hidden_size": TINY_TEXT["hidden_size"],
            "ffn_dim": TINY_TEXT["intermediate_size"],
            "word_embed_proj_dim": TINY_TEXT["hidden_size"],
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 2048,
            "bos_token_id": ids["</s>"],
            "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"],
        },
        num_query_tokens=num_query_tokens,
        image_token_index=ids["<image>"],
    )
    processor = tf.Blip2Processor(
        image_processor=tf.BlipImageProcessor(size={"height": 56, "width": 56}),
        tokenizer=tokenizer,
        num_query_tokens=num_query_tokens,
    )
    return finish(dest, tf.Blip2ForConditionalGeneration, config, processor)


PROOFS: dict[tuple[str, str], Proof] = {("image", "blip-2"): Proof(build_blip2)}
