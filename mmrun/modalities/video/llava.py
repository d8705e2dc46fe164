"""LLaVA models on video: LLaVA-NeXT-Video, LLaVA-OneVision."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "llava-next-video",
    "video",
    repo_id="llava-hf/LLaVA-NeXT-Video-7B-hf",
    architecture="LlavaNextVideoForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
    min_items=1,
    max_items=1,
    source=SINGLE_IMAGE,
)
def llava_next_video(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"USER: <video>\n{ctx.question} ASSISTANT:")


@loader(
    "llava-onevision",
    "video",
    repo_id="llava-hf/llava-onevision-qwen2-7b-ov-hf",
    architecture="LlavaOnevisionForConditionalGeneration",
    engine_args={"max_model_len": 16384},
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def llava_onevision(ctx: LoaderContext) -> Prompt:
    image = "<image>\n" * ctx.companion("image")
    return Prompt(
        text=f"<|im_start|>user {image}<video>\n{ctx.question}<|im_end|><|im_start|>assistant\n"
    )
