"""OpenBMB MiniCPM-V 2.6 and MiniCPM-o 2.6 on images (single-image and video example)."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

MINICPM_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 2}
# The stop tokens of MiniCPM-V 2.6 and MiniCPM-o 2.6 (earlier versions differ).
MINICPM_STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
MINICPM_IMAGE = "(<image>./</image>)"
MINICPM_VIDEO = "(<video>./</video>)"


def minicpm_prompt(ctx: LoaderContext, placeholder: str) -> Prompt:
    """The tokenizer's chat template over one placeholder per item, then the question."""
    media = "\n".join([placeholder] * ctx.num_items)
    messages = text_messages(f"{media}\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in MINICPM_STOP_TOKENS),
    )


@loader(
    "minicpmo",
    "image",
    repo_id="openbmb/MiniCPM-o-2_6",
    architecture="MiniCPMO",
    engine_args=MINICPM_ENGINE_ARGS,
    trust_remote_code=True,
    source=SINGLE_IMAGE,
)
def minicpmo(ctx: LoaderContext) -> Prompt:
    return minicpm_prompt(ctx, MINICPM_IMAGE)


@loader(
    "minicpmv",
    "image",
    repo_id="openbmb/MiniCPM-V-2_6",
    architecture="MiniCPMV",
    engine_args=MINICPM_ENGINE_ARGS,
    trust_remote_code=True,
    source=SINGLE_IMAGE,
)
def minicpmv(ctx: LoaderContext) -> Prompt:
    return minicpm_prompt(ctx, MINICPM_IMAGE)
