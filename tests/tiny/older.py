"""Tiny offline checkpoints for the seed rows that only an older vLLM runs (see tests/tiny).

vLLM 0.32 removed these architectures; each builder here targets the vLLM line named in
:data:`VLLM_LINE` and runs under *that* environment's transformers (build the checkpoint with
the Python that will run it: a tokenizer saved by transformers 5 names its class
``TokenizersBackend``, which transformers 4.57 cannot load). tests/e2e/test_older_vllm_e2e.py
does so: ``ENV/bin/python -m tests.tiny.older build MODALITY KEY DEST``.

Every checkpoint is config-only: vLLM initialises random weights itself (``load_format``
"dummy"), so no transformers model class is needed (Tarsier and QwenVL have none).

What is real and what is a stand-in, per row:

- tarsier (vLLM 0.24): transformers' LlavaConfig with Tarsier's two extra fields, the real
  CLIP image processor; vLLM's own TarsierProcessor expands ``<image>``. The seed's prompt is
  hand-written (no template involved): real prompt format.
- tarsier2 (vLLM 0.23, and 0.24): a Qwen2-VL config saved with ``model_type: "tarsier2"`` (the
  type vLLM's Tarsier2Config registers), the real Qwen2-VL image processor; the seed's prompt
  is hand-written: real prompt format.
- musicflamingo (vLLM 0.24): transformers' MusicFlamingoConfig and MusicFlamingoProcessor
  (Whisper features); the seed's prompt is hand-written ChatML: real prompt format.
- aya_vision (vLLM 0.24): transformers' AyaVisionConfig and AyaVisionProcessor; the chat
  template is a STAND-IN (Cohere's real template is not available offline), so the proof is of
  the engine path, not of the exact prompt.
- hyperclovax_seed_vision (vLLM 0.28): the config class vLLM ships (HCXVisionConfig); the
  processor and image processor classes (remote code) and the chat template are STAND-INS:
  the proof is of the engine path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmrun.tiny import TinyCheckpoint
from mmrun.tiny._common import TINY_TEXT, build_tokenizer, padded_vocab_size, token_ids
from tests.tiny import Proof

# vLLM initialises the weights itself; eager and small, as the other tiny checkpoints.
_ENGINE: dict[str, Any] = {"load_format": "dummy", "max_num_seqs": 2, "max_model_len": 2048}

# Tiny CLIP/SigLIP-style towers (see tests/tiny/image.py): 56-pixel images in 14-pixel patches.
_TOWER = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 56,
    "patch_size": 14,
}


def _transformers() -> Any:
    """The transformers module, untyped: its processor classes have no annotations."""
    import transformers

    return transformers


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _finish_config(config: Any, dest: Path, architecture: str, **fields: Any) -> None:
    """Save config.json with ``architectures`` and any fields written over the saved ones
    (e.g. a ``model_type`` that only vLLM knows)."""
    config.architectures = [architecture]
    dest.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(dest))
    if fields:
        path = dest / "config.json"
        data = json.loads(path.read_text())
        data.update(fields)
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------
# Tarsier (LLaVA layout, Vicuna text, CLIP tower; vLLM 0.24)


def build_tarsier(dest: Path) -> TinyCheckpoint:
    """Tarsier-7b (``TarsierForConditionalGeneration``): LlavaConfig + image_newline_idx and
    image_new_idx, the embedding rows vLLM appends after each patch row and after each image."""
    tf = _transformers()
    tok = build_tokenizer(
        dest,
        ["<unk>", "<s>", "</s>", "<image>", "<pad>", "<image_newline>", "<image_new>"],
        prepend="<s>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    ids = token_ids(tok, ["<s>", "</s>", "<image>", "<image_newline>", "<image_new>"])
    config = tf.LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **_TOWER, "projection_dim": 64},
        # architectures: vLLM 0.12 builds the text model from it (None fails there).
        text_config={
            **TINY_TEXT,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<s>"],
            "eos_token_id": ids["</s>"],
        },
        image_token_index=ids["<image>"],
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
    )
    _finish_config(
        config,
        dest,
        "TarsierForConditionalGeneration",
        image_newline_idx=ids["<image_newline>"],
        image_new_idx=ids["<image_new>"],
    )
    size = _TOWER["image_size"]
    tf.LlavaProcessor(
        image_processor=tf.CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        ),
        tokenizer=tok,
        patch_size=_TOWER["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Tarsier2 (Qwen2-VL layout; vLLM 0.23, last with transformers 4)

_QWEN_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)


def build_tarsier2(dest: Path) -> TinyCheckpoint:
    """Tarsier2-Recap-7b (``Tarsier2ForConditionalGeneration``): a Qwen2-VL config saved with
    ``model_type: "tarsier2"`` (vLLM's Tarsier2Config; vLLM re-reads it as Qwen2VLConfig)."""
    tf = _transformers()
    # Trap: transformers 4.57's Qwen2VLProcessor checks the tokenizer's class ("Received a
    # CachedPreTrainedTokenizerFast for argument tokenizer, but a ('Qwen2Tokenizer',
    # 'Qwen2TokenizerFast') was expected"); transformers 5 does not.
    tokenizer_class = tf.Qwen2TokenizerFast if _transformers_major() < 5 else None
    tok = build_tokenizer(
        dest,
        _QWEN_SPECIALS,
        tokenizer_class=tokenizer_class,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _QWEN_SPECIALS)
    # mrope_section halves sum to head_dim / 2 = 32 (the real 16/24/24 is for head_dim 128).
    rope: dict[str, Any]
    if _transformers_major() >= 5:
        rope = {"rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12]}}
    else:
        rope = {"rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]}}
    config = tf.Qwen2VLConfig(
        text_config={
            **TINY_TEXT,
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            **rope,
        },
        vision_config={
            "depth": 1,
            "num_heads": 2,
            "patch_size": 14,
            "embed_dim": 64,
            "mlp_ratio": 2,
            "hidden_size": TINY_TEXT["hidden_size"],
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    _finish_config(config, dest, "Tarsier2ForConditionalGeneration", model_type="tarsier2")
    # vLLM builds Tarsier2's image and video processors from preprocessor_config.json alone.
    # At most 16 merged 28x28 patches per image. Trap: transformers 4.57 ignores ``size`` and
    # keeps its default min_pixels / max_pixels (about 100 tokens for a 320x240 photo).
    pixels = {"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
    legacy = (
        {}
        if _transformers_major() >= 5
        else {"min_pixels": pixels["shortest_edge"], "max_pixels": pixels["longest_edge"]}
    )
    tf.Qwen2VLImageProcessor(size=pixels, **legacy).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Music Flamingo (AudioFlamingo3 layout + rotary time embedding; vLLM 0.24)

_QWEN_CHAT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_SOUND = ("<sound>", "<|sound_bos|>", "<|sound_eos|>")


def build_musicflamingo(dest: Path) -> TinyCheckpoint:
    """Music Flamingo (``MusicFlamingoForConditionalGeneration``). The time rotary embedding
    reads head_dim (the audio width), rope_parameters and max_position_embeddings from the top
    config."""
    tf = _transformers()
    tok = build_tokenizer(
        dest, [*_QWEN_CHAT, *_SOUND], eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = token_ids(tok, [*_QWEN_CHAT, *_SOUND])
    audio_width = 128
    config = tf.MusicFlamingoConfig(
        # model_type is required here (transformers 5.8.1 indexes it); the real checkpoint's
        # encoder is AudioFlamingo3's.
        audio_config={
            "model_type": "audioflamingo3_encoder",
            "hidden_size": audio_width,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 256,
            "num_mel_bins": 128,
        },
        text_config={
            **TINY_TEXT,
            "model_type": "qwen2",
            "vocab_size": padded_vocab_size(tok),
            "eos_token_id": ids["<|im_end|>"],
            "bos_token_id": ids["<|endoftext|>"],
        },
        audio_token_id=ids["<sound>"],
        audio_bos_token_id=ids["<|sound_bos|>"],
        audio_eos_token_id=ids["<|sound_eos|>"],
    )
    config.head_dim = audio_width
    _finish_config(config, dest, "MusicFlamingoForConditionalGeneration")
    tf.MusicFlamingoProcessor(
        tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True), tok
    ).save_pretrained(str(dest))
    # Trap: vLLM 0.24 takes one audio per Music Flamingo prompt (get_supported_mm_limits is
    # {"audio": 1}: "At most 1 audio(s) may be provided in one prompt").
    return TinyCheckpoint(dest, {**_ENGINE, "enforce_eager": True})


# ---------------------------------------------------------------------------------------------
# Aya Vision (SigLIP tower, Cohere2 text, GOT-OCR2 tiling; vLLM 0.24)

# STAND-IN chat template in Cohere's turn format (the real one, CohereForAI/aya-vision-8b's
# chat_template.json, is not available offline): images first, then the text, per turn.
_AYA_STANDIN_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|START_OF_TURN_TOKEN|>{% if message['role'] == 'user' %}<|USER_TOKEN|>"
    "{% elif message['role'] == 'system' %}<|SYSTEM_TOKEN|>{% else %}<|CHATBOT_TOKEN|>{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<image>{% elif item['type'] == 'text' %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|END_OF_TURN_TOKEN|>{% endfor %}"
    "{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
)
_AYA_SPECIALS = (
    "<PAD>",
    "<UNK>",
    "<BOS_TOKEN>",
    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    "<image>",
    "<|START_OF_IMG|>",
    "<|END_OF_IMG|>",
    "<|IMG_PATCH|>",
    "<|IMG_LINE_BREAK|>",
)


def build_aya_vision(dest: Path) -> TinyCheckpoint:
    """Aya Vision 8B (``AyaVisionForConditionalGeneration``): 2x2 pixel-shuffle downsampling,
    so each 56-pixel tile gives (56 / 28)^2 = 4 patch tokens; at most 2 tiles + a global one."""
    tf = _transformers()
    tok = build_tokenizer(
        dest,
        _AYA_SPECIALS,
        chat_template=_AYA_STANDIN_TEMPLATE,
        bos_token="<BOS_TOKEN>",
        eos_token="<|END_OF_TURN_TOKEN|>",
        pad_token="<PAD>",
        unk_token="<UNK>",
    )
    ids = token_ids(tok, _AYA_SPECIALS)
    size = _TOWER["image_size"]
    downsample = 2
    config = tf.AyaVisionConfig(
        vision_config={"model_type": "siglip_vision_model", **_TOWER},
        text_config={
            **TINY_TEXT,
            "model_type": "cohere2",
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<BOS_TOKEN>"],
            "eos_token_id": ids["<|END_OF_TURN_TOKEN|>"],
            "pad_token_id": ids["<PAD>"],
        },
        image_token_index=ids["<image>"],
        downsample_factor=downsample,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    _finish_config(config, dest, "AyaVisionForConditionalGeneration")
    tf.AyaVisionProcessor(
        image_processor=tf.GotOcr2ImageProcessor(
            size={"height": size, "width": size}, crop_to_patches=True, min_patches=1, max_patches=2
        ),
        tokenizer=tok,
        patch_size=_TOWER["patch_size"] * downsample,
        img_size=size,
        downsample_factor=downsample,
        chat_template=_AYA_STANDIN_TEMPLATE,
    ).save_pretrained(str(dest))
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# Qwen-VL-Chat (QWen decoder + ViT with a cross-attention resampler; vLLM 0.23)


def build_qwen_vl_chat(dest: Path) -> TinyCheckpoint:
    """Qwen-VL-Chat (``QwenVLForConditionalGeneration``). vLLM 0.23 ships the model, the image
    processor and the placeholder expansion (``Picture i: <img></img>`` -> ``<img>`` + pads +
    ``</img>``), but the config class and the tokenizer class are remote code: this checkpoint
    carries STAND-INS of both (tests/tiny/standins/qwen_vl), so it proves vLLM's path and the
    seed's prompt shape, not the original classes. The tokenizer has no chat template, as the
    real one (the loader passes ChatML)."""
    import base64
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    standins = Path(__file__).parent / "standins" / "qwen_vl"
    for name in ("configuration_qwen.py", "tokenization_qwen.py"):
        shutil.copy(standins / name, dest / name)
    # Byte-level vocabulary: the 256 bytes, then the special tokens (ids 256 ... 267).
    (dest / "qwen.tiktoken").write_bytes(
        b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
    )
    specials = (
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<ref>",
        "</ref>",
        "<box>",
        "</box>",
        "<quad>",
        "</quad>",
        "<img>",
        "</img>",
        "<imgpad>",
    )
    ids = {token: 256 + i for i, token in enumerate(specials)}
    (dest / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "QWenTokenizer",
                "auto_map": {"AutoTokenizer": ["tokenization_qwen.QWenTokenizer", None]},
                "model_max_length": 2048,
            },
            indent=2,
        )
        + "\n"
    )
    hidden = TINY_TEXT["hidden_size"]
    config = {
        "architectures": ["QWenLMHeadModel"],
        "auto_map": {"AutoConfig": "configuration_qwen.QWenConfig"},
        "model_type": "qwen",
        "vocab_size": 320,  # 268 tokens, padded
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": hidden // 64,  # head_dim 64 for the CPU attention backend
        "kv_channels": 64,
        "intermediate_size": 2 * 256,  # vLLM's QWenMLP takes intermediate_size // 2
        "layer_norm_epsilon": 1e-6,
        "max_position_embeddings": 2048,
        "rotary_emb_base": 10000,
        "tie_word_embeddings": False,
        # (56 / 14 / 2)^2 = 4 image tokens: n_queries must be that square (the resampler grid).
        "visual": {
            "image_size": 56,
            "patch_size": 14,
            "width": 64,
            "layers": 1,
            "heads": 2,
            "mlp_ratio": 2.0,
            "n_queries": 4,
            "output_dim": hidden,
            "image_start_id": ids["<img>"],
        },
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(_ENGINE))


# ---------------------------------------------------------------------------------------------
# HyperCLOVA X SEED Vision (SigLIP tower, C-Abstractor, anyres tiling, Llama text; vLLM 0.28)

_HCX_STANDINS = Path(__file__).resolve().parent / "standins" / "hyperclovax"
_HCX_FILES = ("processing_hyperclovax.py", "image_processing_hyperclovax.py")
# The turn tokens and the end-of-turn token of HyperCLOVA X, the image placeholder vLLM expands
# (``<|dummy3|>``) and its video placeholder.
_HCX_IMAGE, _HCX_VIDEO = "<|dummy3|>", "<|_unuse_missing_100270|>"
_HCX_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endofturn|>",
    _HCX_IMAGE,
    _HCX_VIDEO,
)
# STAND-IN chat template (the real one is in the checkpoint's tokenizer files, not known
# offline): ChatML turns, each image part as the image placeholder on a line of its own, its
# OCR text and lens keywords (empty in the loader's prompt) left out.
_HCX_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|dummy3|>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_hyperclovax_seed_vision(dest: Path) -> TinyCheckpoint:
    """HyperCLOVAX-SEED-Vision-Instruct-3B (``HCXVisionForCausalLM``). Its config class is the
    one vLLM 0.28 ships (``model_type: "hyperclovax_vlm"``); its processor and image processor
    classes are remote code: STAND-INS (tests/tiny/standins/hyperclovax). A two-layer SigLIP
    tower of width 64 on 56-pixel tiles (the second-to-last layer's output is used), a
    C-Abstractor pooling each tile's 4 x 4 patches to 2 x 2 queries, anyres tiling over grids of
    up to 4 tiles with unpadding and a newline per row (at most 24 image tokens per image), and a
    one-layer Llama text model, random weights (``load_format="dummy"``). The tokenizer is a
    generic one carrying HyperCLOVA X's turn and image tokens; its chat template is a STAND-IN
    (see ``_HCX_TEMPLATE``)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for name in _HCX_FILES:
        shutil.copy(_HCX_STANDINS / name, dest / name)
    tok = build_tokenizer(
        dest,
        _HCX_SPECIALS,
        chat_template=_HCX_TEMPLATE,
        eos_token="<|endofturn|>",
        pad_token="<|endoftext|>",
    )
    ids = token_ids(tok, _HCX_SPECIALS)
    tile, queries, max_grids = _TOWER["image_size"], 4, 4
    # [height, width] in pixels of every tile grid of at most max_grids tiles, 1 x 1 included.
    resolutions = [
        [rows * tile, cols * tile]
        for rows in range(1, max_grids + 1)
        for cols in range(1, max_grids + 1)
        if rows * cols <= max_grids
    ]
    config = {
        "architectures": ["HCXVisionForCausalLM"],
        "model_type": "hyperclovax_vlm",
        "text_config": {
            **TINY_TEXT,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": padded_vocab_size(tok),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|endofturn|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": False,
        },
        "vision_config": {"model_type": "siglip_vision_model", **_TOWER},
        "use_nth_layer": -2,
        "anyres": True,
        "unpad": True,
        "max_num_grids": max_grids,
        "use_1x1_grid": True,
        "possible_resolutions": resolutions,
        "mm_projector_type": "cabstractor",
        "proj_pos_emb": True,
        "proj_prenorm": False,
        "num_queries_vis_abstractor": queries,
        "num_queries_vis_abstractor_image": queries,
        "num_queries_vis_abstractor_video_slow": queries,
        "num_queries_vis_abstractor_video_fast": 1,
        "first_last_frames_slow": False,
        "img_start_id": ids[_HCX_IMAGE],
        "image_token_id": ids[_HCX_IMAGE],
        "video_token_id": ids[_HCX_VIDEO],
        "decoder_max_length": TINY_TEXT["max_position_embeddings"],
    }
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    preprocessor = {
        "image_processor_type": "HCXImageProcessor",
        "processor_class": "HCXProcessor",
        "grid_size": tile,
        "possible_resolutions": resolutions,
        "num_queries_vis_abstractor": queries,
        "unpad": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "auto_map": {
            "AutoProcessor": "processing_hyperclovax.HCXProcessor",
            "AutoImageProcessor": "image_processing_hyperclovax.HCXImageProcessor",
        },
    }
    (dest / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    return TinyCheckpoint(dest, dict(_ENGINE))


# (modality, key) -> how each row is proven, and on which older vLLM line (see tests.tiny.Proof).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "tarsier"): Proof(build_tarsier, env="0.24"),
    ("audio", "musicflamingo"): Proof(build_musicflamingo, env="0.24"),
    ("image", "aya_vision"): Proof(
        build_aya_vision, env="0.24", standin="chat template", real_prompt=False
    ),
    # The real checkpoint needs transformers 4 (vLLM 0.32's removal table: "last version with
    # Transformers v4"), which the 0.23 line has; the tiny one also runs on 0.24.
    ("image", "tarsier2"): Proof(build_tarsier2, env="0.23"),
    # The prompt string is the seed's, but its tokenization (the image tags, the specials)
    # is done by the stand-in tokenizer class.
    ("image", "qwen_vl_chat"): Proof(
        build_qwen_vl_chat, env="0.23", standin="config and tokenizer classes", real_prompt=False
    ),
    # The config class is vLLM 0.28's own; the prompt comes from the stand-in template.
    ("image", "hyperclovax_seed_vision"): Proof(
        build_hyperclovax_seed_vision,
        env="0.28",
        standin="processor and image processor classes, chat template",
        real_prompt=False,
    ),
}


def main(argv: list[str] | None = None) -> int:
    """Run by the environment of an older vLLM line (tests/e2e/test_older_vllm_e2e.py):

    ``python -m tests.tiny.older build MODALITY KEY DEST``: build one checkpoint with this
    environment's transformers; prints its engine and sampling arguments as JSON.
    ``python -m tests.tiny.older count DEST TEXT``: how many tokens TEXT is to the
    checkpoint's tokenizer, special tokens included, without BOS/EOS added.
    """
    import sys

    args = argv if argv is not None else sys.argv[1:]
    if args[0] == "build":
        modality, key, dest = args[1:4]
        checkpoint = PROOFS[(modality, key)].builder(Path(dest))
        doc = {
            "path": str(checkpoint.path),
            "engine_args": dict(checkpoint.engine_args),
            "sampling_args": dict(checkpoint.sampling_args),
        }
        print(json.dumps(doc))
        return 0
    if args[0] == "count":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args[1], trust_remote_code=True)
        print(len(tokenizer(args[2], add_special_tokens=False).input_ids))
        return 0
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
