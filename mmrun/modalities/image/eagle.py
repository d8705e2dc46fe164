"""NVIDIA Eagle 2.5 (single-image example)."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# Eagle 2.5 is built on Qwen2: its turns end with any of these.
QWEN2_STOP_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@loader(
    "eagle2_5",
    "image",
    repo_id="nvidia/Eagle2.5-8B",
    architecture="Eagle2_5_VLForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 2},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def eagle2_5(ctx: LoaderContext) -> Prompt:
    messages = text_messages(f"<image>\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in QWEN2_STOP_TOKENS),
    )
