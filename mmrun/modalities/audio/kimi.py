"""Kimi-Audio: Moonshot AI's audio foundation model."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

# Kimi-Audio's EOS id; the model repeats itself unless generation stops there.
KIMI_AUDIO_EOS = 151644


@loader(
    "kimi_audio",
    "audio",
    repo_id="moonshotai/Kimi-Audio-7B-Instruct",
    architecture="MoonshotKimiaForCausalLM",
    # One prompt at a time: vLLM 0.32's Kimi-Audio cannot batch clips of different lengths
    # (its audio tower gets a list where it expects a tensor: "'list' object has no attribute
    # 'dim'"), so a batch of several prompts runs them one after another.
    engine_args={"max_model_len": 4096, "max_num_seqs": 1},
    trust_remote_code=True,
    # vLLM (0.23 to 0.32) takes one audio per Kimi-Audio prompt (get_supported_mm_limits).
    max_items=1,
    methods=("generate",),
    note=(
        "vLLM's own tests run it with tokenizer_mode='kimi_audio', which vLLM picks by "
        "itself for this architecture"
    ),
)
def kimi_audio(ctx: LoaderContext) -> Prompt:
    question = ctx.question or "Please transcribe the audio"
    return Prompt(
        text="<|im_kimia_text_blank|>" * ctx.num_items + question, stop_token_ids=(KIMI_AUDIO_EOS,)
    )
