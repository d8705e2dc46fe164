"""FunAudioChat: Alibaba's FunAudioLLM spoken-dialogue model."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "funaudiochat",
    "audio",
    # Not on the Hugging Face Hub: vLLM's example's placeholder name, replaced by --model.
    repo_id="funaudiochat",
    architecture="FunAudioChatForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 2, "enforce_eager": True},
    methods=("generate",),
    needs_model=True,
    note="no public checkpoint: --model (a local path or repo id) is required",
)
def funaudiochat(ctx: LoaderContext) -> Prompt:
    placeholders = "<|audio_bos|><|AUDIO|><|audio_eos|>\n" * ctx.num_items
    return Prompt(text=f"{placeholders}{ctx.question}")
