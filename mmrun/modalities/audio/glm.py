"""GLM-ASR: Zhipu AI's speech recognition model."""

from __future__ import annotations

from mmrun.prompts import text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "glmasr",
    "audio",
    repo_id="zai-org/GLM-ASR-Nano-2512",
    architecture="GlmAsrForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 2},
    trust_remote_code=True,
    methods=("generate",),
    max_items=1,
    note="its processor takes one audio per prompt (two fail in transformers)",
)
def glmasr(ctx: LoaderContext) -> Prompt:
    messages = text_messages("<|pad|>" * ctx.num_items + ctx.question)
    return Prompt(text=ctx.templates.render(messages, source="tokenizer"))
