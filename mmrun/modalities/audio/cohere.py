"""Cohere speech recognition: Cohere Transcribe, one clip per prompt."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt

# The decoder prompt is a fixed task header (English in, English out, punctuation, no
# timestamps, no diarization); the model takes no question.
TRANSCRIBE_PROMPT = (
    "<|startofcontext|><|startoftranscript|><|emo:undefined|><|en|><|en|><|pnc|><|noitn|>"
    "<|notimestamp|><|nodiarize|>"
)


@loader(
    "cohere_asr",
    "audio",
    repo_id="CohereLabs/cohere-transcribe-03-2026",
    architecture="CohereAsrForConditionalGeneration",
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    methods=("generate",),
    takes_question=False,
)
def cohere_asr(ctx: LoaderContext) -> Prompt:
    return Prompt(text=TRANSCRIBE_PROMPT)
