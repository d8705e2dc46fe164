"""Tiny offline checkpoints for the image keys vLLM's current multi-image example added
(see tests/tiny/__init__.py and tools/upstream.py).

Proof levels, as in docs/models.md: a builder whose prompt is written by hand in the loader
(paddleocr_vl) proves the real prompt format; one whose prompt comes from the model's chat
template carries a stand-in template where the real one is not known offline, which proves
the engine path, not the exact prompt (said per builder and in PROOFS).
"""

from __future__ import annotations

from pathlib import Path

from mmrun.tiny import Builder, TinyCheckpoint
from mmrun.tiny._common import (
    CPU_ARGS,
    build_tokenizer,
    finish,
    save_config,
    token_ids,
    transformers_module,
)
from tests.tiny import Proof
from tests.tiny.image import (
    _GLM4V_TEMPLATE,
    GLM_V_VISION,
    _text,
    glm_v_media_ids,
    glm_v_tokenizer,
)

# ---------------------------------------------------------------------------------------------
# GLM-4.1V-Thinking


def build_glm4_1v(dest: Path) -> TinyCheckpoint:
    """GLM-4.1V-Thinking (``Glm4vForConditionalGeneration``: GLM-4.5V's tower, dense text).

    Stand-in template: GLM-4.5V's (tests/tiny/image.py); GLM-4.1V-9B-Thinking's own is not
    known offline.
    """
    tf = transformers_module()
    tokenizer, ids = glm_v_tokenizer(dest)
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
    config = tf.Glm4vConfig(
        text_config=text,
        vision_config=GLM_V_VISION,
        **glm_v_media_ids(ids),
    )
    pixels = {"shortest_edge": 112 * 112, "longest_edge": 32 * 28 * 28}
    processor = tf.Glm4vProcessor(
        image_processor=tf.Glm4vImageProcessor(size=pixels),
        video_processor=tf.Glm4vVideoProcessor(),
        tokenizer=tokenizer,
        chat_template=_GLM4V_TEMPLATE,
    )
    return finish(dest, tf.Glm4vForConditionalGeneration, config, processor)


# ---------------------------------------------------------------------------------------------
# EXAONE 4.5

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
    text = _text(
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


# ---------------------------------------------------------------------------------------------
# Granite Vision 4.1

# Granite's role and text markers, and the image placeholder (Granite4VisionProcessor's
# default, and the one vLLM's model names).
_GRANITE_SPECIALS = ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<image>")
# STAND-IN chat template: Granite's turns (<|start_of_role|>ROLE<|end_of_role|> CONTENT
# <|end_of_text|>), each image as <image> where the content puts it; the real template is not
# known offline.
_GRANITE_TEMPLATE = (
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

    Stand-in chat template: see ``_GRANITE_TEMPLATE``.
    """
    tf = transformers_module()
    tokenizer = build_tokenizer(
        dest,
        _GRANITE_SPECIALS,
        chat_template=_GRANITE_TEMPLATE,
        bos_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
        image_token="<image>",
    )
    ids = token_ids(tokenizer, _GRANITE_SPECIALS)
    text = _text(
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
        chat_template=_GRANITE_TEMPLATE,
        downsample_rate="4/8",
    )
    return finish(
        dest,
        tf.Granite4VisionForConditionalGeneration,
        config,
        processor,
        rename=_siglip_tower_names,
    )


def _siglip_tower_names(name: str) -> str:
    """``model.vision_tower.X`` -> ``model.vision_tower.vision_model.X``: the SigLIP tower's
    names as vLLM's Granite 4 Vision loader takes them (transformers 5 saves the tower without
    its ``vision_model`` level)."""
    prefix = "model.vision_tower."
    return prefix + "vision_model." + name[len(prefix) :] if name.startswith(prefix) else name


# ---------------------------------------------------------------------------------------------
# PaddleOCR-VL


def build_paddleocr_vl(dest: Path) -> TinyCheckpoint:
    """PaddleOCR-VL (``PaddleOCRVLForConditionalGeneration``: SigLIP NaViT tower, ERNIE-4.5
    text): transformers' own config and processor classes, config only (vLLM initialises
    random weights). The loader writes the prompt by hand, so this proves the real format.

    Trap: vLLM reads the image processor's size as the Hub's remote processor spells it
    (``min_pixels``/``max_pixels``) when ``trust_remote_code`` is on, and as transformers'
    own class spells it (``shortest_edge``/``longest_edge``) when it is off; this checkpoint
    carries transformers' class, so it runs with trust_remote_code off.
    """
    import json

    tf = transformers_module()
    specials = [
        "<unk>",
        "<|begin_of_sentence|>",
        "<|end_of_sentence|>",
        "<|IMAGE_START|>",
        "<|IMAGE_PLACEHOLDER|>",
        "<|IMAGE_END|>",
        "<|video_pad|>",
    ]
    tokenizer = build_tokenizer(
        dest,
        specials,
        unk_token="<unk>",
        bos_token="<|begin_of_sentence|>",
        eos_token="<|end_of_sentence|>",
        image_token="<|IMAGE_PLACEHOLDER|>",
    )
    ids = token_ids(tokenizer, specials)
    # 14-pixel patches merged 2 x 2, as the real model; 4 to 16 merged tokens per image.
    processor = tf.PaddleOCRVLProcessor(
        image_processor=tf.PaddleOCRVLImageProcessor(
            size={"shortest_edge": 4 * 28 * 28, "longest_edge": 16 * 28 * 28}
        ),
        tokenizer=tokenizer,
    )
    processor.save_pretrained(str(dest))
    config = tf.PaddleOCRVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 56,
            "patch_size": 14,
            "spatial_merge_size": 2,
        },
        text_config=_text(
            tokenizer,
            # mrope over head_dim 64: 8 + 12 + 12 = 32 rotary pairs (the real 16/24/24 is for 128).
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 500000.0,
                "mrope_section": [8, 12, 12],
            },
            bos_token_id=ids["<|begin_of_sentence|>"],
            eos_token_id=ids["<|end_of_sentence|>"],
            pad_token_id=ids["<unk>"],
        ),
        image_token_id=ids["<|IMAGE_PLACEHOLDER|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|IMAGE_START|>"],
        vision_end_token_id=ids["<|IMAGE_END|>"],
    )
    save_config(config, dest, "PaddleOCRVLForConditionalGeneration")
    (dest / "generation_config.json").write_text(json.dumps({"do_sample": False}))
    return TinyCheckpoint(dest, {**CPU_ARGS, "load_format": "dummy", "trust_remote_code": False})


BUILDERS: dict[str, Builder] = {
    "glm4_1v": build_glm4_1v,
    "paddleocr_vl": build_paddleocr_vl,
}

# Rows whose proof is not the real prompt format (the image row's prompt comes from a stand-in
# chat template) or that are not image rows. EXAONE 4.5's video row runs the image row's
# checkpoint with the video loader's hand-written prompt (tests/e2e/test_video_e2e.py).
PROOFS: dict[tuple[str, str], Proof] = {
    ("image", "exaone4_5"): Proof(build_exaone4_5, standin="chat template", real_prompt=False),
    ("image", "granite4_vision"): Proof(
        build_granite4_vision, standin="chat template", real_prompt=False
    ),
    ("video", "exaone4_5"): Proof(build_exaone4_5, standin="chat template"),
}

# The other keys vLLM's example added, with why they have no offline proof on vLLM 0.32.
UNPROVEN: dict[str, str] = {
    # vLLM's own config and processor classes would do, but its model builds full-size SAM
    # ViT-B and CLIP-L towers whatever the config says, and runs 1024-pixel global views.
    "deepseek_ocr": "not built: vLLM hard-codes full-size SAM ViT-B and CLIP-L towers",
    # vLLM runs it through its Transformers backend, which swaps transformers' linear layers
    # for its own; the tower's patch merger feeds its output projection a permuted tensor,
    # and vLLM's x86 CPU GEMM kernels (oneDNN, and SGL on AMX) need the last dimension
    # contiguous. A tiny checkpoint of transformers' own classes gets that far.
    "hunyuan_vl": "fails on vLLM 0.32's CPU backend: the vision patch merger's projection "
    "gets a non-contiguous input ('mat1 must be contiguous at last dimension')",
    # Stand-in classes would not help: vLLM's OpenPanguVisionTransformer refuses every ViT
    # attention backend but FLASH_ATTN when it is built, and the CPU platform offers only
    # TORCH_SDPA (an mm_encoder_attn_backend of FLASH_ATTN fails the platform's check).
    "openpangu_vl": "fails on vLLM 0.32's CPU backend: its vision tower takes only the "
    "FLASH_ATTN attention backend, the CPU platform only TORCH_SDPA ('Pangu-VL does not "
    "support AttentionBackendEnum.TORCH_SDPA backend now'); its config, processor and "
    "tokenizer classes are also remote code",
}
