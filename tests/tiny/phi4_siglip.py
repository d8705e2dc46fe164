"""Tiny checkpoint of Phi-4-reasoning-vision (``Phi4ForCausalLMV``: a SigLIP 2 NaFlex tower,
a two-layer projector and a Phi-3 text model), whose config and processor classes are remote
code: STAND-IN config and processor classes (tests/tiny/standins/phi4_siglip/) written from
what vLLM reads and calls, over transformers' SigLIP 2 image processor. It proves the loader's
hand-written prompt on the engine (vLLM's processor, placeholder expansion from the image
processor's patch grid, the tower, the text model), not the original classes.
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

_STANDINS = Path(__file__).resolve().parent / "standins" / "phi4_siglip"

# The turn tokens of the loader's prompt (mmrun/modalities/image/phi.py) and its image
# placeholder, a token of its own here (vLLM matches the ids "<image>" encodes to, whatever
# their number).
_PHI4_SPECIALS = ("<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<image>")
# vLLM's Phi4ForCausalLMV expands each "<image>" into this token, at the id it hard-codes
# (100256, the Phi-4 tokenizer's first reserved token).
_IMAGE_PAD = {100256: "<|dummy_0|>"}
# The Phi-4 vocabulary's size: the embedding rows that reach the hard-coded id.
_VOCAB_SIZE = 100352
# STAND-IN chat template (the real one is in the checkpoint's files, not known offline): the
# turns of the loader's prompt, each image part as <image> and a newline where the content
# puts it.
_PHI4_TEMPLATE = (
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
    embedding rows; its chat template is a STAND-IN (see ``_PHI4_TEMPLATE``)."""
    tf = transformers_module()
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("configuration_phi4_siglip.py", "processing_phi4_siglip.py"):
        shutil.copy(_STANDINS / name, dest / name)
    tok = build_tokenizer(
        dest,
        _PHI4_SPECIALS,
        chat_template=_PHI4_TEMPLATE,
        eos_token="<|end|>",
        pad_token="<|endoftext|>",
    )
    tok = _place_tokens(tok, _IMAGE_PAD, dest)
    patch, width = 16, 64
    config: dict[str, Any] = {
        "architectures": ["Phi4ForCausalLMV"],
        "auto_map": {"AutoConfig": "configuration_phi4_siglip.Phi4SiglipConfig"},
        "model_type": "phi4_siglip",
        **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},  # Phi-3 derives it: 64
        "vocab_size": _VOCAB_SIZE,
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
    (dest / "chat_template.jinja").write_text(_PHI4_TEMPLATE)
    engine = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
    return TinyCheckpoint(dest, engine)


# The generate prompt is the loader's (written by hand, as vLLM's example's); chat runs the
# stand-in template. The image processor is transformers' SigLIP 2 class, an assumption: the
# real checkpoint's is not known offline.
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "phi4_siglip"): Proof(
        build_phi4_siglip, standin="config and processor classes, image processor, chat template"
    ),
}
