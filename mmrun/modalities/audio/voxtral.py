"""Voxtral: Mistral AI's speech-understanding models, tokenized by mistral_common."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from mmrun.errors import MediaError, MmrunError
from mmrun.hub_access import check_reachable
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@cache
def _mistral_tokenizer(model: str) -> Any:
    """The model's mistral tokenizer, loaded once per model (the loader runs per prompt)."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    local = Path(model)
    try:
        if local.is_dir():
            return MistralTokenizer.from_file(local / "tekken.json")
        check_reachable(model, "the mistral tokenizer")
        return MistralTokenizer.from_hf_hub(model)
    except (OSError, ValueError) as exc:  # no tekken.json, or the Hub unreachable
        raise MmrunError(
            f"cannot load the mistral tokenizer of {model}: {exc}",
            hint="check the model id or path (a local model needs tekken.json)",
        ) from exc


@loader(
    "voxtral",
    "audio",
    repo_id="mistralai/Voxtral-Mini-3B-2507",
    architecture="VoxtralForConditionalGeneration",
    engine_args={
        "max_model_len": 8192,
        "max_num_seqs": 2,
        "config_format": "mistral",
        "load_format": "mistral",
        "tokenizer_mode": "mistral",
        "enforce_eager": True,
        "enable_chunked_prefill": False,
    },
    reads_media=True,
    # vLLM (0.23 to 0.32) takes at most 5 audios per Voxtral prompt (get_supported_mm_limits).
    max_items=5,
    methods=("generate",),
    requires=("mistral_common",),
    # mistral_common resamples clips that are not at the model's 16 kHz with soxr.
    note="tokenized by mistral_common: pip install 'mistral-common[audio]' (adds soxr)",
)
def voxtral(ctx: LoaderContext) -> Prompt:
    # Deliberate deviation from vLLM's example, which always tokenizes with the tokenizer of
    # mistralai/Voxtral-Mini-3B-2507 from the Hub: mmrun loads the tokenizer of the model it
    # runs (a local folder or a Hub id) and encodes the prompt's own decoded clips.
    import numpy as np
    from mistral_common.protocol.instruct.chunk import AudioChunk, ContentChunk, TextChunk
    from mistral_common.protocol.instruct.messages import UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.audio import Audio

    if len(ctx.media) != ctx.num_items:
        raise MediaError(
            f"voxtral tokenizes its audio itself: it needs the {ctx.num_items} decoded "
            f"clip(s) of the prompt, got {len(ctx.media)}"
        )
    chunks: list[ContentChunk] = []
    for waveform, sample_rate in ctx.media:
        samples = np.asarray(waveform, dtype=np.float32)
        if samples.ndim > 1:
            # (frames, channels), soundfile's layout: downmix as mistral_common's own
            # non-strict decoding does.
            samples = samples.mean(axis=1)
        # "wav" only names the container the chunk re-encodes the clip in for the tokenizer.
        audio = Audio(audio_array=samples, sampling_rate=int(sample_rate), format="wav")
        # vLLM's example's AudioChunk(input_audio=RawAudio.from_audio(audio)), without RawAudio,
        # which mistral_common deprecates.
        chunks.append(AudioChunk.from_audio(audio))
    chunks.append(TextChunk(text=ctx.question))

    request = ChatCompletionRequest(messages=[UserMessage(content=chunks)], model=ctx.model)
    encoded = _mistral_tokenizer(ctx.model).encode_chat_completion(request)
    return Prompt(
        token_ids=tuple(encoded.tokens),
        multi_modal_data=[(clip.audio_array, clip.sampling_rate) for clip in encoded.audios],
    )
