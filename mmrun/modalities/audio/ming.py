"""inclusionAI's Ming-3.0 ASR (vLLM 0.34's audio example)."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

# The instruction vLLM's model module defines (vllm.model_executor.models.ming_v3_asr) and its
# example puts ahead of the clip: the model answers "<language>\t<transcript>".
ASR_INSTRUCTION = (
    "Please recognize the language of this speech and transcribe it, "
    "placing a `\t` between the identified language and the transcribe."
)


@loader(
    "ming_v3_asr",
    "audio",
    repo_id="inclusionAI/Ming-3.0-asr-tiny",
    architecture="MingV3ASRForConditionalGeneration",
    engine_args={
        "dtype": "bfloat16",
        "max_model_len": 8192,
        "max_num_seqs": 4,
        "enforce_eager": True,
    },
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    methods=("generate",),
    since="0.34",
    note="a transcriber: it answers the language and the transcript, and ignores the question",
    source=UPSTREAM,
)
def ming_v3_asr(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"{ASR_INSTRUCTION}<audio><audioPatch></audio>")
