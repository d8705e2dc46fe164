"""IBM Granite Speech."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, LoraAdapter, Prompt

# Granite's chat format with its default system turn (fixed dates, as the model card has).
GRANITE_SYSTEM = (
    "Knowledge Cutoff Date: April 2024.\nToday's Date: December 19, 2024.\n"
    "You are Granite, developed by IBM. You are a helpful AI assistant"
)


@loader(
    "granite_speech",
    "audio",
    repo_id="ibm-granite/granite-speech-3.3-8b",
    architecture="GraniteSpeechForConditionalGeneration",
    engine_args={
        "max_model_len": 2048,
        "max_num_seqs": 2,
        "enable_lora": True,
        "max_lora_rank": 64,
    },
    # The speech LoRA sits at the root of the model repository and must be active
    # whenever the prompt carries audio.
    lora=LoraAdapter("speech", 1, subfolder=None),
    trust_remote_code=True,
    # vLLM (0.23 to 0.32) takes one audio per Granite Speech prompt (get_supported_mm_limits).
    max_items=1,
    methods=("generate",),
    note="the model card recommends beam search; mmrun samples like the vLLM example",
)
def granite_speech(ctx: LoaderContext) -> Prompt:
    audio = "<|audio|>" * ctx.num_items
    return Prompt(
        text=f"<|start_of_role|>system<|end_of_role|>{GRANITE_SYSTEM}<|end_of_text|>\n"
        f"<|start_of_role|>user<|end_of_role|>{audio}{ctx.question}<|end_of_text|>\n"
        "<|start_of_role|>assistant<|end_of_role|>"
    )
