"""Tiny checkpoint of Skywork-R1V (see tests/tiny/__init__.py), whose config class is remote
code: a STAND-IN (tests/tiny/standins/internvl/), copied into the folder and named in
config.json's ``auto_map`` as the Hub's is, loaded with ``--trust-remote-code``. Weights are
random (vLLM's ``load_format="dummy"``).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof
from tests.tiny._common import DUMMY_ENGINE, copy_standins, write_json
from tests.tiny.intern import INTERN_VIT

# Skywork-R1V-38B's text model is DeepSeek-R1-Distill-Qwen-32B: its turn tokens, Qwen2's, and
# InternVL's image tokens (vLLM's processor writes <img><IMG_CONTEXT>...</img>).
_SKYWORK_SPECIALS = [
    "<｜begin▁of▁sentence｜>",  # noqa: RUF001
    "<｜end▁of▁sentence｜>",  # noqa: RUF001
    "<｜User｜>",  # noqa: RUF001
    "<｜Assistant｜>",  # noqa: RUF001
    "<think>",
    "</think>",
    "<|endoftext|>",
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
]

# STAND-IN chat template: the turns of DeepSeek-R1-Distill-Qwen's template (user and
# assistant only), the text model's; Skywork-R1V's own is in its Hub tokenizer files.
_SKYWORK_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "<｜User｜>{{ message['content'] }}{% elif message['role'] == 'assistant' %}"  # noqa: RUF001
    "<｜Assistant｜>{{ message['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}"  # noqa: RUF001
    "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}"  # noqa: RUF001
)


def build_skywork_chat(dest: Path) -> TinyCheckpoint:
    """Skywork-R1V-38B (``SkyworkR1VChatModel``): InternViT, an MLP projector and a Qwen2 text
    model. The config class is a STAND-IN (tests/tiny/standins/internvl/: InternVL's fields,
    which vLLM's skyworkr1v.py reads), loaded as remote code. vLLM builds the processor
    itself (InternVL tiling): 56-pixel tiles of 7-pixel patches, pixel-shuffled by 0.5 -> 16
    tokens per tile. The chat template is a STAND-IN (the text model's turns)."""
    bos, eos = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"  # noqa: RUF001
    tok = build_tokenizer(
        dest, _SKYWORK_SPECIALS, chat_template=_SKYWORK_TEMPLATE, bos_token=bos, eos_token=eos
    )
    ids = token_ids(tok, [bos, eos])
    copy_standins("internvl", dest, "configuration_internvl_chat.py")
    size = INTERN_VIT["image_size"]
    write_json(
        dest / "config.json",
        {
            "architectures": ["SkyworkR1VChatModel"],
            "auto_map": {"AutoConfig": "configuration_internvl_chat.SkyworkR1VChatConfig"},
            "model_type": "skywork_chat",
            "vision_config": dict(INTERN_VIT),
            "llm_config": {
                **TINY_TEXT,
                "model_type": "qwen2",
                "architectures": ["Qwen2ForCausalLM"],
                "vocab_size": padded_vocab_size(tok),
                "bos_token_id": ids[bos],
                "eos_token_id": ids[eos],
                "hidden_act": "silu",
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "tie_word_embeddings": False,
            },
            "select_layer": -1,
            "force_image_size": size,
            "downsample_ratio": 0.5,
            "dynamic_image_size": True,
            "use_thumbnail": True,
            "ps_version": "v2",
            "min_dynamic_patch": 1,
            "max_dynamic_patch": 6,
        },
    )
    return TinyCheckpoint(dest, dict(DUMMY_ENGINE))


PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "skywork_chat"): Proof(
        build_skywork_chat, standin="config class, chat template", real_prompt=False
    ),
}
