"""MiDashengLM: Xiaomi's audio-language model on the Dasheng audio encoder."""

from __future__ import annotations

from mmrun.modalities._shapes import chatml
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


@loader(
    "midashenglm",
    "audio",
    repo_id="mispeech/midashenglm-7b",
    architecture="MiDashengLMModel",
    trust_remote_code=True,
    methods=("generate",),
)
def midashenglm(ctx: LoaderContext) -> ModelRequest:
    audio = "<|audio_bos|><|AUDIO|><|audio_eos|>" * ctx.num_items
    return ModelRequest(
        engine_args={"max_model_len": 4096, "max_num_seqs": 5},
        prompt=chatml(
            audio + ctx.question, system="You are a helpful language and speech assistant."
        ),
    )
