"""Whisper: OpenAI's speech recognition model, one clip per prompt."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


@loader(
    "whisper",
    "audio",
    repo_id="openai/whisper-large-v3-turbo",
    architecture="WhisperForConditionalGeneration",
    min_items=1,
    max_items=1,
    methods=("generate",),
    max_audio_seconds=30.0,  # the encoder's fixed 30 s window; longer clips need long-form models
)
def whisper(ctx: LoaderContext) -> ModelRequest:
    # An encoder-decoder transcriber: the decoder prompt only starts the transcript and
    # takes no question.
    return ModelRequest(
        engine_args={"max_model_len": 448, "max_num_seqs": 5},
        prompt="<|startoftranscript|>",
    )
