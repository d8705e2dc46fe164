"""Tiny offline checkpoints for the image keys vLLM's current multi-image example added
(see tests/tiny/__init__.py and tools/upstream.py).

Proof levels, as in docs/models.md: a builder whose prompt is written by hand in the loader
(paddleocr_vl, hunyuan_vl) proves the real prompt format; one whose prompt comes from the
model's chat template carries a stand-in template where the real one is not known offline,
which proves the engine path, not the exact prompt (said per builder).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, finish, token_ids, transformers_module
from tests.tiny.image import _GLM4V_TEMPLATE, _text

# ---------------------------------------------------------------------------------------------
# GLM-4.1V-Thinking


def build_glm4_1v(dest: Path) -> TinyCheckpoint:
    """GLM-4.1V-Thinking (``Glm4vForConditionalGeneration``: GLM-4.5V's tower, dense text).

    Stand-in template: GLM-4.5V's (tests/tiny/image.py); GLM-4.1V-9B-Thinking's own is not
    known offline.
    """
    tf = transformers_module()
    specials = [
        "<|endoftext|>",
        "[gMASK]",
        "<sop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
        "<|begin_of_image|>",
        "<|end_of_image|>",
        "<|image|>",
        "<|begin_of_video|>",
        "<|end_of_video|>",
        "<|video|>",
        "<think>",
        "</think>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        chat_template=_GLM4V_TEMPLATE,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tokenizer, specials)
    text = _text(
        tokenizer,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [4, 6, 6],
            "partial_rotary_factor": 0.5,
        },
        eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    vision = {
        "depth": 1,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "out_hidden_size": TINY_TEXT["hidden_size"],
    }
    config = tf.Glm4vConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
    )
    pixels = {"shortest_edge": 112 * 112, "longest_edge": 32 * 28 * 28}
    processor = tf.Glm4vProcessor(
        image_processor=tf.Glm4vImageProcessor(size=pixels),
        video_processor=tf.Glm4vVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=_GLM4V_TEMPLATE,
    )
    return finish(dest, tf.Glm4vForConditionalGeneration, config, processor)


BUILDERS: dict[str, Builder] = {
    "glm4_1v": build_glm4_1v,
}

# The other keys vLLM's example added, with why they have no offline proof on vLLM 0.32.
UNPROVEN: dict[str, str] = {
    "bee": "config and processor classes need remote code (Bee)",
    # vLLM's own config and processor classes would do, but its model builds full-size SAM
    # ViT-B and CLIP-L towers whatever the config says, and runs 1024-pixel global views.
    "deepseek_ocr": "not built: vLLM hard-codes full-size SAM ViT-B and CLIP-L towers",
    "exaone4_5": "not built yet (transformers' classes exist; the real chat template is not "
    "known offline)",
    "granite4_vision": "not built yet (transformers' classes exist; the real chat template is "
    "not known offline)",
    "hunyuan_vl": "not built yet (transformers' classes exist; vLLM runs it through its "
    "Transformers backend)",
    "molmo2": "config and processor classes need remote code (Molmo2)",
    "openpangu_vl": "config, processor and tokenizer classes need remote code (openPangu-VL)",
    "paddleocr_vl": "not built yet (transformers' classes exist)",
    "phi4_siglip": "config and processor classes need remote code (Phi-4-reasoning-vision)",
    "stepvl": "config class needs remote code (Step3-VL); vLLM ships only the processor",
}
