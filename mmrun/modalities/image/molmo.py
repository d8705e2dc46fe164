"""Ai2's Molmo vision models: Molmo, Molmo2."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import SINGLE_IMAGE, UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "molmo2",
    "image",
    repo_id="allenai/Molmo2-8B",
    architecture="Molmo2ForConditionalGeneration",
    engine_args={"dtype": "bfloat16", "max_num_batched_tokens": 36864},
    trust_remote_code=True,
    source=UPSTREAM,
)
def molmo2(ctx: LoaderContext) -> Prompt:
    # vLLM's example loads the processor without trust_remote_code; Molmo2's processor is
    # remote code, so mmrun loads it with the flag, as it does the model.
    return template_prompt(ctx, "image")


@loader(
    "molmo",
    "image",
    repo_id="allenai/Molmo-7B-D-0924",
    architecture="MolmoForCausalLM",
    engine_args={"dtype": "bfloat16"},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def molmo(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"<|im_start|>user <image>\n{ctx.question}<|im_end|><|im_start|>assistant\n")
