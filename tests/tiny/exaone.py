"""Tiny checkpoint of EXAONE 4.5 (see tests/tiny/__init__.py): its image row's prompt comes
from a stand-in chat template (the real one is not known offline), which proves the engine
path, not the exact prompt; the video row's prompt is hand-written.
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config

# EXAONE 4.5's turn and vision tokens, as vLLM's example prompt spells them.
_EXAONE_SPECIALS = (
    "<|endofturn|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<vision>",
    "</vision>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# STAND-IN chat template: the turns and vision spans of vLLM's example prompt (each turn's
# role token and a newline, its content, <|endofturn|>), each medium as <vision>PAD</vision>
# where the content puts it, with no system turn unless one is given; the real template is
# not known offline.
_EXAONE_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<vision><|image_pad|></vision>"
    "{% elif part['type'] == 'video' %}<vision><|video_pad|></vision>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|endofturn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_exaone4_5(dest: Path) -> TinyCheckpoint:
    """EXAONE 4.5 (``Exaone4_5_ForConditionalGeneration``): an EXAONE 4 text model (a
    sliding-window layer, then a global one), EXAONE 4.5's vision tower (Qwen2.5-VL's layout
    with grouped-query attention and 2-D rotary embeddings), and the real EXAONE 4.5
    processor over the Qwen2-VL image and video processors it names.

    Stand-in chat template (the image row's prompt; the video row's is hand-written): see
    ``_EXAONE_TEMPLATE``.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _EXAONE_SPECIALS,
        chat_template=_EXAONE_TEMPLATE,
        eos_token="<|endofturn|>",
    )
    ids = token_ids(tokenizer, _EXAONE_SPECIALS)
    text = text_config(
        tokenizer,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=512,
        bos_token_id=None,  # the tokenizer prepends none
        eos_token_id=ids["<|endofturn|>"],
    )
    vision = {
        "depth": 1,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "num_key_value_heads": 1,
        "out_hidden_size": text["hidden_size"],
        "fullatt_block_indexes": [0],
        "window_size": 56,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0},
    }
    config = tf.Exaone4_5_Config(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
    )
    # At most 16 merged 28x28 patches per image or frame pair: a few placeholder tokens each.
    pixels = {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
    processor = tf.Exaone4_5_Processor(
        image_processor=tf.Qwen2VLImageProcessor(size=pixels),
        video_processor=tf.Qwen2VLVideoProcessor(size=pixels),
        tokenizer=tokenizer,
        chat_template=_EXAONE_TEMPLATE,
    )
    return finish(dest, tf.Exaone4_5_ForConditionalGeneration, config, processor)


# The video row runs the image row's checkpoint with the video loader's hand-written
# prompt (tests/e2e/test_video_e2e.py).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "exaone4_5"): Proof(build_exaone4_5, standin="chat template", real_prompt=False),
    ("video", "exaone4_5"): Proof(build_exaone4_5, standin="chat template"),
}
