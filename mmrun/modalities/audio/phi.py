"""Microsoft Phi-4-multimodal, here with audio input."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, LoraAdapter, Prompt


@loader(
    "phi4_mm",
    "audio",
    repo_id="microsoft/Phi-4-multimodal-instruct",
    architecture="Phi4MMForCausalLM",
    engine_args={
        "max_model_len": 12800,
        "max_num_seqs": 2,
        "enable_lora": True,
        "max_lora_rank": 320,
    },
    # Audio runs through the speech LoRA that ships next to the base weights.
    lora=LoraAdapter("speech", 1, subfolder="speech-lora"),
    trust_remote_code=True,
    methods=("generate",),
)
def phi4_mm(ctx: LoaderContext) -> Prompt:
    audio = numbered("<|audio_{i}|>", ctx.num_items)
    return Prompt(text=f"<|user|>{audio}{ctx.question}<|end|><|assistant|>")
