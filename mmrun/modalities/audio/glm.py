"""GLM-ASR: Zhipu AI's speech recognition model."""

from __future__ import annotations

from mmrun.modalities._shapes import text_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


@loader(
    "glmasr",
    "audio",
    repo_id="zai-org/GLM-ASR-Nano-2512",
    architecture="GlmAsrForConditionalGeneration",
    trust_remote_code=True,
    methods=("generate",),
    max_items=1,
    note="its processor takes one audio per prompt (two fail in transformers)",
)
def glmasr(ctx: LoaderContext) -> ModelRequest:
    messages = text_messages("<|pad|>" * ctx.num_items + ctx.question)
    return ModelRequest(
        engine_args={"max_model_len": 4096, "max_num_seqs": 2},
        prompt=ctx.templates.render(messages, source="tokenizer"),
    )
