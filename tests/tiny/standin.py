"""Tiny checkpoints of seed rows whose config class is remote code, with a STAND-IN class
(tests/tiny/standins/) written by this project from the fields vLLM reads. They prove vLLM's
own processor, placeholder expansion and model path; they do not prove the original class.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof

_STANDINS = Path(__file__).parent / "standins"
_ENGINE: dict[str, Any] = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}
# A one-layer InternViT tower (56-pixel images, 7-pixel patches): the vision config of the
# InternVL-style checkpoints.
INTERN_VIT: dict[str, Any] = {
    "architectures": ["InternVisionModel"],
    "model_type": "intern_vit_6b",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "image_size": 56,
    "patch_size": 7,
    "num_channels": 3,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-6,
    "norm_type": "layer_norm",
    "qk_normalization": False,
    "qkv_bias": True,
    "initializer_factor": 1.0,
}


def _byte_level_tiktoken(dest: Path) -> None:
    """A tiktoken vocabulary of the 256 bytes (no merges): ``<base64 token> <rank>`` lines."""
    dest.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))


# Ids that vLLM hard-codes for Kimi-Audio (vllm/transformers_utils/processors/kimi_audio.py,
# vllm/tokenizers/kimi_audio.py); the names of 151643/151644 are this project's.
_KIMIA_SPECIALS = {
    151643: "<|im_kimia_bos|>",
    151644: "<|im_kimia_eos|>",
    151645: "<|im_msg_end|>",
    151661: "<|im_media_begin|>",
    151663: "<|im_media_end|>",
    151666: "<|im_kimia_text_blank|>",
    151670: "<|im_kimia_user_msg_start|>",
    151671: "<|im_kimia_assistant_msg_start|>",
}


def build_kimi_audio(dest: Path) -> TinyCheckpoint:
    """Kimi-Audio-7B-Instruct (``MoonshotKimiaForCausalLM``): stand-in config class; vLLM's
    own tokenizer (tiktoken.model + tokenizer_config.json's added_tokens_decoder), processor
    and Whisper encoder (config and feature extractor in ``whisper-large-v3/``). The vocabulary
    must reach the hard-coded ids (151671): 151680 embedding rows of width 128."""
    import transformers

    tf: Any = transformers  # untyped: its processor classes have no annotations
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(_STANDINS / "kimi_audio" / "configuration_moonshot_kimia.py", dest)
    _byte_level_tiktoken(dest / "tiktoken.model")
    decoder = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in _KIMIA_SPECIALS.items()
    }
    (dest / "tokenizer_config.json").write_text(
        json.dumps({"added_tokens_decoder": decoder}, indent=2) + "\n"
    )
    whisper_width = 128
    config = {
        "architectures": ["MoonshotKimiaForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_moonshot_kimia.MoonshotKimiaConfig"},
        "model_type": "moonshot_kimia",
        **{k: v for k, v in TINY_TEXT.items() if k != "head_dim"},
        "vocab_size": 151680,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 151643,
        "eos_token_id": 151644,
        "kimia_adaptor_input_dim": 4 * whisper_width,
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    sub = dest / "whisper-large-v3"
    tf.WhisperConfig(
        d_model=whisper_width,
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=256,
        decoder_layers=1,
        decoder_attention_heads=2,
        decoder_ffn_dim=256,
        num_mel_bins=128,
        max_source_positions=1500,
        vocab_size=512,  # the decoder is never built; its token ids only need to fit
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        decoder_start_token_id=0,
    ).save_pretrained(str(sub))
    tf.WhisperFeatureExtractor(feature_size=128).save_pretrained(str(sub))
    # One request per engine step, as kimi_audio's spec says (max_num_seqs=1; the CPU sizes'
    # 2 would override it): vLLM 0.32's Kimi-Audio pads each clip's features only to the
    # longest clip of its own request, and when two requests with clips of different lengths
    # share a step, its model gets a list instead of a tensor and fails ("'list' object has
    # no attribute 'dim'", kimi_audio.py _process_audio_input).
    return TinyCheckpoint(dest, {**_ENGINE, "max_num_seqs": 1, "max_num_batched_tokens": 2048})


# STAND-IN chat template for Intern-S1 (its real template lives in the remote
# InternS1Tokenizer's files, not available offline): plain ChatML, string or part contents.
_CHATML_STANDIN = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_interns1(dest: Path) -> TinyCheckpoint:
    """Intern-S1 (``InternS1ForConditionalGeneration``): vLLM's InternS1 reads only
    transformers' own InternVLConfig / InternVLVisionConfig fields and uses transformers'
    InternVLProcessor (GotOcr2 tiling) and InternVLVideoProcessor, so no class is a stand-in;
    the tokenizer is a generic one with the InternVL image tokens and the chat template is a
    STAND-IN. Text model: a tiny dense Qwen3 (the real one is Qwen3-MoE)."""
    import transformers

    tf: Any = transformers
    named: dict[str, Any] = {
        "start_image_token": "<img>",
        "end_image_token": "</img>",
        "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>",
    }
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_CHATML_STANDIN,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        **named,
    )
    ids = token_ids(tok, ["<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>"])
    size, patch = 56, 14
    config = tf.InternVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": [size, size],
            "patch_size": [patch, patch],
        },
        text_config={
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
        },
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=(size // patch) ** 2 // 4,
        downsample_ratio=0.5,
    )
    config.architectures = ["InternS1ForConditionalGeneration"]
    config.save_pretrained(str(dest))
    tf.InternVLProcessor(
        image_processor=tf.GotOcr2ImageProcessor(
            size={"height": size, "width": size}, crop_to_patches=True, max_patches=2
        ),
        tokenizer=tok,
        video_processor=tf.InternVLVideoProcessor(size={"height": size, "width": size}),
        image_seq_length=(size // patch) ** 2 // 4,
        chat_template=_CHATML_STANDIN,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(_ENGINE))


# InternVL-style chat checkpoints: one stand-in config module, three model types.
# Chat templates are STAND-INS (the real ones are in the checkpoints' tokenizer files).
_INTERNVL_CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_H2OVL_STANDIN = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "<|prompt|>{{ message['content'] }}{{ eos_token }}{% elif message['role'] == 'assistant' %}"
    "<|answer|>{{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|answer|>{% endif %}"
)
_INTERNVL_KINDS: dict[str, dict[str, Any]] = {
    "internvl_chat": {
        "architecture": "InternVLChatModel",
        "class": "InternVLChatConfig",
        "text": ("qwen2", "Qwen2ForCausalLM"),
        "specials": [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<|end|>",
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
        ],
        "template": _INTERNVL_CHATML,
        "tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    },
    "h2ovl_chat": {
        "architecture": "H2OVLChatModel",
        "class": "H2OVLChatConfig",
        "text": ("llama", "LlamaForCausalLM"),
        "specials": [
            "<unk>",
            "<s>",
            "</s>",
            "<|prompt|>",
            "<|answer|>",
            "<img>",
            "</img>",
            "<IMG_CONTEXT>",
        ],
        "template": _H2OVL_STANDIN,
        "tokens": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        "extra": {"use_msac": False},
    },
    "NVLM_D": {
        "architecture": "NVLM_D",
        "class": "NVLM_D_Config",
        "text": ("qwen2", "Qwen2ForCausalLM"),
        "specials": [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<Image>",
            "</Image>",
            "<|vision_pad|>",
        ],
        "template": _INTERNVL_CHATML,
        "tokens": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    },
}


def _internvl_family(dest: Path, kind: str, specials: tuple[str, ...] = ()) -> TinyCheckpoint:
    """vLLM builds these processors itself from config fields (image_size, patch_size,
    downsample_ratio, min/max_dynamic_patch, dynamic_image_size, use_thumbnail, use_msac):
    56-pixel tiles of 7-pixel patches, pixel-shuffled by 0.5 -> 16 tokens per tile (with 4,
    the test's small images added no more tokens in ``chat`` than the seed's "Image-i: "
    prefixes that ``generate`` has and vLLM's chat placeholders do not)."""

    spec = _INTERNVL_KINDS[kind]
    tok = build_tokenizer(
        dest, [*spec["specials"], *specials], chat_template=spec["template"], **spec["tokens"]
    )
    eos = spec["tokens"]["eos_token"]
    ids = token_ids(tok, [eos])
    shutil.copy(_STANDINS / "internvl" / "configuration_internvl_chat.py", dest)
    text_type, text_arch = spec["text"]
    config = {
        "architectures": [spec["architecture"]],
        "auto_map": {"AutoConfig": f"configuration_internvl_chat.{spec['class']}"},
        "model_type": kind,
        "vision_config": dict(INTERN_VIT),
        "llm_config": {
            **TINY_TEXT,
            "model_type": text_type,
            "architectures": [text_arch],
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids[eos],
        },
        "select_layer": -1,
        "force_image_size": 56,
        "downsample_ratio": 0.5,
        "dynamic_image_size": True,
        "use_thumbnail": True,
        "ps_version": "v2",
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 6,
        **spec.get("extra", {}),
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(_ENGINE))


def build_internvl_chat(dest: Path) -> TinyCheckpoint:
    """InternVL2 (``InternVLChatModel``); tiny text model Qwen2 (InternVL2-2B's is InternLM2)."""
    return _internvl_family(dest, "internvl_chat")


def build_internvl3(dest: Path) -> TinyCheckpoint:
    """InternVL3 (``InternVLChatModel``, the video row's): as :func:`build_internvl_chat` with
    the Qwen2.5 tokenizer's ``<|video_pad|>``, which vLLM's InternVL needs to take video (it
    expands each frame into it). Not the image row's checkpoint: with a video processor, vLLM
    0.32 also passes the image row's ``max_dynamic_patch`` to it, which it rejects."""
    return _internvl_family(dest, "internvl_chat", ("<|video_pad|>",))


def build_h2ovl_chat(dest: Path) -> TinyCheckpoint:
    """H2OVL-Mississippi (``H2OVLChatModel``): Llama-architecture text model."""
    return _internvl_family(dest, "h2ovl_chat")


def build_nvlm_d(dest: Path) -> TinyCheckpoint:
    """NVLM-D (``NVLM_D``): Qwen2 text model, ``<Image>``/``<tile_i>``/``<|vision_pad|>``."""
    return _internvl_family(dest, "NVLM_D")


def _pad_vocab_to(hf_tokenizer: Any, token: str, token_id: int, dest: Path) -> Any:
    """One token at a fixed id (see :func:`_place_tokens`)."""
    return _place_tokens(hf_tokenizer, {token_id: token}, dest)


def _place_tokens(hf_tokenizer: Any, placed: dict[int, str], dest: Path) -> Any:
    """Re-save ``hf_tokenizer`` so that each token of ``placed`` (added, special) gets its id:
    the BPE model's vocabulary is padded with unreachable filler entries between them.
    Needed where vLLM hard-codes a token id (e.g. Ovis: ``<|image_pad|>`` = 151655); the
    ``tokenizers`` library ignores an id written into ``added_tokens`` and renumbers it."""
    import transformers
    from tokenizers import AddedToken, Tokenizer

    tf: Any = transformers

    data = json.loads(hf_tokenizer.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    taken = {t["id"] for t in data["added_tokens"]} | set(vocab.values())
    # The fixed tokens go into the model vocabulary at their ids, fillers fill the gaps (the
    # vocabulary must be contiguous); adding them as special tokens afterwards keeps the ids
    # (tokenizers reuses a model id for an added token it already knows).
    for i in range(max(taken) + 1, max(placed) + 1):
        vocab[placed.get(i, f"<|filler_{i}|>")] = i
    raw = Tokenizer.from_str(json.dumps(data))
    raw.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in placed.values()])
    for i, t in placed.items():
        assert raw.token_to_id(t) == i, (t, raw.token_to_id(t))
    wrapped = tf.PreTrainedTokenizerFast(
        tokenizer_object=raw,
        chat_template=hf_tokenizer.chat_template,
        **{k: v for k, v in hf_tokenizer.special_tokens_map.items() if isinstance(v, str)},
    )
    wrapped.save_pretrained(str(dest))
    return wrapped


# transformers' convert_ovis2_weights_to_hf.py chat template (the converted checkpoint's; the
# original Ovis2 tokenizer's Qwen2.5 template renders string contents the same way).
_OVIS2_TEMPLATE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<image>\n' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{'<|im_end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}"
    "{% endif %}"
)


def build_ovis(dest: Path) -> TinyCheckpoint:
    """Ovis2-1B in its original layout (``Ovis``, model_type "ovis"): vLLM ships the config
    (OvisConfig) and the processor (OvisProcessor), so nothing here is a stand-in class. Data
    that is: the image processor (SiglipImageProcessor resizing to the given size: OvisProcessor
    resizes, pads and partitions itself) and the template (from transformers' conversion
    script). vLLM hard-codes ``<|image_pad|>`` = 151655 for a Qwen2 text model: the tokenizer
    is padded to put it there (151680 embedding rows of width 128)."""
    import transformers

    tf: Any = transformers
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_OVIS2_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok = _pad_vocab_to(tok, "<|image_pad|>", 151655, dest)
    size, patch = 56, 14
    config = {
        "architectures": ["Ovis"],
        "model_type": "ovis",
        "hidden_size": TINY_TEXT["hidden_size"],
        "multimodal_max_length": 2048,
        "llm_config": {
            **TINY_TEXT,
            "model_type": "qwen2",
            "architectures": ["Qwen2ForCausalLM"],
            "vocab_size": 151680,
            "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
        },
        "visual_tokenizer_config": {
            "model_type": "aimv2_visual_tokenizer",
            "vocab_size": 69,  # 64 visual words + the 5 indicator ids
            "tokenize_function": "softmax",
            "tau": 1.0,
            "depths": [1],
            "drop_cls_token": False,
            "hidden_stride": 2,
            "backbone_config": {
                "model_type": "aimv2",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "image_size": size,
                "patch_size": patch,
                "num_channels": 3,
                "qkv_bias": False,
                "mlp_bias": False,
                "rms_norm_eps": 1e-5,
            },
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tf.SiglipImageProcessor(size={"height": size, "width": size}).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(_ENGINE))


# Ovis2.5's tokens around the ids vLLM hard-codes (ovis2_5.py: IMAGE_PAD_TOKEN_ID = 151655,
# INDICATOR_IDS = 151672-151675, the indicators being the image/video start and end tokens).
# 151655 is Qwen's <|image_pad|>; the order 151669-151675 follows the order in which vLLM's
# Ovis2_5Processor lists the tokens it needs: an ASSUMPTION (the real tokenizer is not here).
_OVIS2_5_TOKENS = {
    151655: "<|image_pad|>",
    151669: "<image>",
    151670: "<video>",
    151671: "<ovis_visual_atom>",
    151672: "<ovis_image_start>",
    151673: "<ovis_image_end>",
    151674: "<ovis_video_start>",
    151675: "<ovis_video_end>",
}


def build_ovis2_5(dest: Path) -> TinyCheckpoint:
    """Ovis2.5-2B (``Ovis2_5``): STAND-IN config classes (Ovis2_5Config, Siglip2NavitConfig);
    vLLM's own Ovis2_5Processor (smart resize to multiples of patch x stride, then the
    checkpoint's image processor) and model. 64-pixel patches keep the tower's patch count
    small: vLLM profiles with a 1792 x 1792 image (784 patches here, 12544 with the real 16)."""
    import transformers

    tf: Any = transformers
    tok = build_tokenizer(
        dest,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        chat_template=_CHATML_STANDIN.replace("<IMG_CONTEXT>", "<image>"),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok = _place_tokens(tok, _OVIS2_5_TOKENS, dest)
    shutil.copy(_STANDINS / "ovis2_5" / "configuration_ovis2_5.py", dest)
    patch = 64
    config = {
        "architectures": ["Ovis2_5"],
        "auto_map": {"AutoConfig": "configuration_ovis2_5.Ovis2_5Config"},
        "model_type": "ovis2_5",
        "hidden_size": TINY_TEXT["hidden_size"],
        "visual_vocab_size": 68,  # 64 visual words + the 4 indicators
        "llm_config": {
            **TINY_TEXT,
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": 151680,
            "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
        },
        "vit_config": {
            "model_type": "siglip2_navit",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "image_size": 512,
            "patch_size": patch,
            "temporal_patch_size": 1,
            "hidden_stride": 2,
            "num_patches": 64,  # an 8 x 8 position table, interpolated to each grid
            "preserve_original_pe": True,
            "use_rope": True,
            "window_size": 4 * patch,
            "fullatt_block_indexes": "0",
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tf.SiglipImageProcessor(size={"height": 512, "width": 512}).save_pretrained(str(dest))
    return TinyCheckpoint(dest, {**_ENGINE, "max_num_batched_tokens": 2048})


# (modality, key) -> how each row is proven (see tests.tiny.Proof): vLLM's own processor and
# model on the project's vLLM, with what the checkpoint carries in place of the model's files.
PROOFS: dict[tuple[str, str], Proof] = {
    # The prompt is the seed's own (hand-written); only the config class is a stand-in.
    ("audio", "kimi_audio"): Proof(build_kimi_audio, standin="config class"),
    ("image", "interns1"): Proof(
        build_interns1, standin="chat template, generic tokenizer", real_prompt=False
    ),
    ("video", "interns1"): Proof(
        build_interns1, standin="chat template, generic tokenizer", real_prompt=False
    ),
    ("image", "internvl_chat"): Proof(
        build_internvl_chat, standin="config class, chat template", real_prompt=False
    ),
    ("video", "internvl_chat"): Proof(
        build_internvl3, standin="config class, chat template", real_prompt=False
    ),
    ("image", "h2ovl_chat"): Proof(
        build_h2ovl_chat, standin="config class, chat template", real_prompt=False
    ),
    ("image", "NVLM_D"): Proof(
        build_nvlm_d, standin="config class, chat template", real_prompt=False
    ),
    # The template is transformers' conversion script's (the converted checkpoint's), the
    # image processor class an assumption: neither is read from the real checkpoint.
    ("image", "ovis"): Proof(
        build_ovis, standin="chat template, image processor", real_prompt=False
    ),
    ("image", "ovis2_5"): Proof(
        build_ovis2_5,
        standin="config classes, chat template, image processor, token order",
        real_prompt=False,
    ),
    ("video", "ovis2_5"): Proof(
        build_ovis2_5,
        standin="config classes, chat template, image processor, token order",
        real_prompt=False,
    ),
}
