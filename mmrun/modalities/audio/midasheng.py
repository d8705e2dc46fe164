"""MiDashengLM: Xiaomi's audio-language model on the Dasheng audio encoder."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "midashenglm",
    "audio",
    repo_id="mispeech/midashenglm-7b",
    architecture="MiDashengLMModel",
    engine_args={"max_model_len": 4096, "max_num_seqs": 5},
    trust_remote_code=True,
    methods=("generate",),
)
def midashenglm(ctx: LoaderContext) -> Prompt:
    audio = "<|audio_bos|><|AUDIO|><|audio_eos|>" * ctx.num_items
    system = "You are a helpful language and speech assistant."
    return Prompt(text=chatml(audio + ctx.question, system=system))
