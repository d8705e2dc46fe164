"""Tiny checkpoints of Idefics3 and SmolVLM2 (see tests/tiny/__init__.py): tiles of the real
size cut into a few large patches.

Trap: SmolVLM's processor needs the ``num2words`` package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import build_tokenizer, finish, token_ids, transformers_module
from tests.tiny import Proof
from tests.tiny._common import text_config

# HuggingFaceM4/Idefics3-8B-Llama3 and HuggingFaceTB/SmolVLM2-2.2B-Instruct, chat_template.json.
_IDEFICS3_TEMPLATE = (
    "<|begin_of_text|>{% for message in messages %}{{message['role'].capitalize()}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

_SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}"
    "{% elif line['type'] == 'video' %}{{ '<video>' }}{% endif %}{% endfor %}<end_of_utterance>\n"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)

# The tile grid markers of both processors (<row_1_col_1> ...), added tokens in the real
# tokenizers; 6 x 6 covers the largest split the image sizes of vLLM's examples produce.
_GRID_TOKENS = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]


def _idefics_like(
    dest: Path,
    *,
    smol: bool,
    tile: int,
    patch: int,
    longest_edge: int,
) -> TinyCheckpoint:
    tf = transformers_module()

    bos = "<|im_start|>" if smol else "<|begin_of_text|>"
    tokenizer = build_tokenizer(
        dest,
        [
            bos,
            "<|end_of_text|>",
            "<fake_token_around_image>",
            "<image>",
            "<end_of_utterance>",
            "<global-img>",
            "<video>",
        ],
        chat_template=_SMOLVLM_TEMPLATE if smol else _IDEFICS3_TEMPLATE,
        added_tokens=_GRID_TOKENS,
        # Llama 3's tokenizer (Idefics3) puts <|begin_of_text|> before every text; SmolVLM's not.
        prepend=None if smol else bos,
        bos_token=bos,
        eos_token="<end_of_utterance>" if smol else "<|end_of_text|>",
        pad_token="<|end_of_text|>",
    )
    ids = token_ids(tokenizer, [bos, "<|end_of_text|>", "<image>", "<end_of_utterance>"])
    # A tile of the real size (vLLM's examples' mm_processor_kwargs name it) cut into few big
    # patches: (tile // patch)**2 / scale**2 placeholder tokens per tile.
    scale = 2
    vision = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": tile,
        "patch_size": patch,
    }
    text = text_config(
        tokenizer, model_type="llama", bos_token_id=ids[bos], eos_token_id=ids["<end_of_utterance>"]
    )
    image_seq_len = (tile // patch) ** 2 // scale**2
    config_class: Any
    if smol:
        config_class, model_class = tf.SmolVLMConfig, tf.SmolVLMForConditionalGeneration
        processor = tf.SmolVLMProcessor(
            image_processor=tf.SmolVLMImageProcessor(
                size={"longest_edge": longest_edge}, max_image_size={"longest_edge": tile}
            ),
            video_processor=tf.SmolVLMVideoProcessor(
                size={"longest_edge": tile}, max_image_size={"longest_edge": tile}
            ),
            tokenizer=tokenizer,
            image_seq_len=image_seq_len,
            chat_template=_SMOLVLM_TEMPLATE,
        )
    else:
        config_class, model_class = tf.Idefics3Config, tf.Idefics3ForConditionalGeneration
        processor = tf.Idefics3Processor(
            image_processor=tf.Idefics3ImageProcessor(
                size={"longest_edge": longest_edge}, max_image_size={"longest_edge": tile}
            ),
            tokenizer=tokenizer,
            image_seq_len=image_seq_len,
            chat_template=_IDEFICS3_TEMPLATE,
        )
    config = config_class(
        vision_config=vision,
        text_config=text,
        scale_factor=scale,
        image_token_id=ids["<image>"],
        pad_token_id=ids["<|end_of_text|>"],
    )
    return finish(dest, model_class, config, processor)


def build_idefics3(dest: Path) -> TinyCheckpoint:
    """Idefics3 (``Idefics3ForConditionalGeneration``): 364-pixel tiles as the real model."""
    return _idefics_like(dest, smol=False, tile=364, patch=91, longest_edge=4 * 364)


def build_smolvlm(dest: Path) -> TinyCheckpoint:
    """SmolVLM2 (``SmolVLMForConditionalGeneration``): 384-pixel tiles as the real model."""
    return _idefics_like(dest, smol=True, tile=384, patch=96, longest_edge=4 * 384)


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "idefics3"): Proof(build_idefics3),
    ("image", "smolvlm"): Proof(build_smolvlm),
}
