"""IBM Granite vision models: Granite Vision 4.1."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "granite4_vision",
    "image",
    # vLLM's example names this repository; vLLM's own test registry marks it as not
    # available online, and vLLM's model list shows ibm-granite/granite-4.1-3b-vision.
    repo_id="ibm-granite/granite-vision-4.1-4b",
    architecture="Granite4VisionForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 16},
    source=UPSTREAM,
)
def granite4_vision(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
