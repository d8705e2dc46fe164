"""Whisper: OpenAI's speech recognition model, one clip per prompt."""

from __future__ import annotations

from mmrun.modalities.audio.checks import AudioLimits
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "whisper",
    "audio",
    repo_id="openai/whisper-large-v3-turbo",
    architecture="WhisperForConditionalGeneration",
    engine_args={"max_model_len": 448, "max_num_seqs": 5},
    min_items=1,
    max_items=1,
    methods=("generate",),
    takes_question=False,
    # the encoder's fixed 30 s window; longer clips need long-form models
    media_options=AudioLimits(max_seconds=30.0),
)
def whisper(ctx: LoaderContext) -> Prompt:
    # An encoder-decoder transcriber: the decoder prompt only starts the transcript and
    # takes no question.
    return Prompt(text="<|startoftranscript|>")
