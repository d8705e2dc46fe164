"""Qwen audio models: Qwen2-Audio, Qwen2.5-Omni, Qwen3-ASR."""

from __future__ import annotations

from mmrun.prompts import chatml, numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

QWEN_AUDIO = "<|audio_bos|><|AUDIO|><|audio_eos|>"

# Qwen2.5-Omni's own system prompt, which its audio handling was trained with.
OMNI_SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of "
    "perceiving auditory and visual inputs, as well as generating text and speech."
)

_ENGINE_ARGS = {"max_model_len": 4096, "max_num_seqs": 5}


@loader(
    "qwen2_audio",
    "audio",
    repo_id="Qwen/Qwen2-Audio-7B-Instruct",
    architecture="Qwen2AudioForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    methods=("generate",),
)
def qwen2_audio(ctx: LoaderContext) -> Prompt:
    audio = numbered(f"Audio {{i}}: {QWEN_AUDIO}\n", ctx.num_items)
    return Prompt(text=chatml(audio + ctx.question, system="You are a helpful assistant."))


@loader(
    "qwen2_5_omni",
    "audio",
    repo_id="Qwen/Qwen2.5-Omni-7B",
    # The config's name; vLLM runs it as Qwen2_5OmniThinkerForConditionalGeneration.
    architecture="Qwen2_5OmniModel",
    engine_args=_ENGINE_ARGS,
    methods=("generate",),
)
def qwen2_5_omni(ctx: LoaderContext) -> Prompt:
    audio = f"{QWEN_AUDIO}\n" * ctx.num_items
    return Prompt(text=chatml(audio + ctx.question, system=OMNI_SYSTEM))


@loader(
    "qwen3_asr",
    "audio",
    repo_id="Qwen/Qwen3-Asr-1.7B",
    architecture="Qwen3ASRForConditionalGeneration",
    engine_args=_ENGINE_ARGS,
    methods=("generate",),
)
def qwen3_asr(ctx: LoaderContext) -> Prompt:
    # A transcriber: the user turn holds only the audio, the question is not sent.
    audio = "<|audio_start|><|audio_pad|><|audio_end|>\n" * ctx.num_items
    return Prompt(text=chatml(audio))
