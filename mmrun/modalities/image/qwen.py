"""Qwen vision models: Qwen-VL-Chat, Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni, Qwen3-VL, Qwen3.5."""

from __future__ import annotations

from mmrun.modalities.audio.qwen import OMNI_SYSTEM
from mmrun.modalities.image.resize import ImageResize
from mmrun.prompts import chatml, media_first_messages, numbered, text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# Qwen-VL-Chat's tokenizer has no chat template; its generation utils use ChatML.
CHATML_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
    "{% endif %}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
QWEN_VL_STOP_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

_QWEN2_VL_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 5}

# vLLM's example resizes Qwen2(.5)-VL images only when the optional `qwen_vl_utils` package
# happens to be importable (and then uses max_model_len 4096, else 32768). mmrun always
# resizes, with the same rule and budget, so a run does not depend on what is installed.
QWEN2_VL_RESIZE = ImageResize(max_pixels=1024 * 28 * 28)


def _qwen2_vl_prompt(ctx: LoaderContext) -> Prompt:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        *media_first_messages("image", ctx.num_items, ctx.question),
    ]
    return Prompt(text=ctx.templates.render(messages, source="processor"))


@loader(
    "qwen_vl_chat",
    "image",
    repo_id="Qwen/Qwen-VL-Chat",
    architecture="QwenVLForConditionalGeneration",
    engine_args={
        "max_model_len": 1024,
        "max_num_seqs": 2,
        "hf_overrides": {"architectures": ["QwenVLForConditionalGeneration"]},
    },
    chat_template=CHATML_TEMPLATE,
    trust_remote_code=True,
    note="supported in vLLM only until v0.23.0; needs an older vLLM",
)
def qwen_vl_chat(ctx: LoaderContext) -> Prompt:
    placeholders = numbered("Picture {i}: <img></img>\n", ctx.num_items)
    messages = text_messages(f"{placeholders}\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer", chat_template=CHATML_TEMPLATE),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in QWEN_VL_STOP_TOKENS),
    )


@loader(
    "qwen2_vl",
    "image",
    repo_id="Qwen/Qwen2-VL-7B-Instruct",
    architecture="Qwen2VLForConditionalGeneration",
    engine_args=_QWEN2_VL_ENGINE_ARGS,
    media_options=QWEN2_VL_RESIZE,
)
def qwen2_vl(ctx: LoaderContext) -> Prompt:
    return _qwen2_vl_prompt(ctx)


@loader(
    "qwen2_5_vl",
    "image",
    repo_id="Qwen/Qwen2.5-VL-3B-Instruct",
    architecture="Qwen2_5_VLForConditionalGeneration",
    engine_args=_QWEN2_VL_ENGINE_ARGS,
    media_options=QWEN2_VL_RESIZE,
)
def qwen2_5_vl(ctx: LoaderContext) -> Prompt:
    return _qwen2_vl_prompt(ctx)


# vLLM's single-image and video example for Qwen2.5-Omni, Qwen3-VL and Qwen3.5: the pixel bounds
# of each image or frame, and one frame per second of video.
QWEN_MM_PROCESSOR_KWARGS = {"min_pixels": 28 * 28, "max_pixels": 1280 * 28 * 28, "fps": 1}
QWEN3_ENGINE_ARGS = {
    "max_model_len": 4096,
    "max_num_seqs": 5,
    "mm_processor_kwargs": QWEN_MM_PROCESSOR_KWARGS,
}
QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
QWEN_VIDEO = "<|vision_start|><|video_pad|><|vision_end|>"
OMNI_IMAGE = "<|vision_bos|><|IMAGE|><|vision_eos|>"
OMNI_VIDEO = "<|vision_bos|><|VIDEO|><|vision_eos|>"


def qwen_prompt(
    ctx: LoaderContext, placeholder: str, system: str = "You are a helpful assistant."
) -> Prompt:
    """A ChatML prompt with the media placeholders first, written by hand as vLLM's
    single-image and video example does for Qwen models."""
    return Prompt(text=chatml(placeholder * ctx.num_items + ctx.question, system=system))


@loader(
    "qwen2_5_omni",
    "image",
    repo_id="Qwen/Qwen2.5-Omni-7B",
    # The config's name; vLLM runs it as Qwen2_5OmniThinkerForConditionalGeneration.
    architecture="Qwen2_5OmniModel",
    engine_args=QWEN3_ENGINE_ARGS,
    methods=("generate",),
    source=SINGLE_IMAGE,
)
def qwen2_5_omni(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, OMNI_IMAGE, system=OMNI_SYSTEM)


@loader(
    "qwen3_vl",
    "image",
    repo_id="Qwen/Qwen3-VL-4B-Instruct",
    architecture="Qwen3VLForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    source=SINGLE_IMAGE,
)
def qwen3_vl(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE)


@loader(
    "qwen3_vl_moe",
    "image",
    repo_id="Qwen/Qwen3-VL-30B-A3B-Instruct",
    architecture="Qwen3VLMoeForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    source=SINGLE_IMAGE,
)
def qwen3_vl_moe(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE)


@loader(
    "qwen3_5",
    "image",
    repo_id="Qwen/Qwen3.5-4B",
    architecture="Qwen3_5ForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    source=SINGLE_IMAGE,
)
def qwen3_5(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE)


@loader(
    "qwen3_5_moe",
    "image",
    repo_id="Qwen/Qwen3.5-35B-A3B",
    architecture="Qwen3_5MoeForConditionalGeneration",
    engine_args=QWEN3_ENGINE_ARGS,
    source=SINGLE_IMAGE,
)
def qwen3_5_moe(ctx: LoaderContext) -> Prompt:
    return qwen_prompt(ctx, QWEN_IMAGE)
