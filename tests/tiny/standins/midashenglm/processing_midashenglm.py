# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for MiDashengLM's remote processor class (MiDashengLMProcessor), written from what
vLLM 0.32's midashenglm.py reads and calls: the ``feature_extractor`` (its sampling rate), the
``audio_token``/``audio_bos_token``/``audio_eos_token`` strings, and a call on
``text``/``audio`` that returns the waveforms padded by the feature extractor as
``input_values`` and each clip's sample count as ``audio_length``. vLLM itself expands each
``<|AUDIO|>`` to the number of encoder frames it derives from ``audio_length``, so the text
is only tokenized here."""

from typing import Any

import numpy as np
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class MiDashengLMProcessor(ProcessorMixin):
    def __init__(self, feature_extractor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.audio_token = getattr(tokenizer, "audio_token", None) or "<|AUDIO|>"
        self.audio_bos_token = getattr(tokenizer, "audio_bos_token", None) or "<|audio_bos|>"
        self.audio_eos_token = getattr(tokenizer, "audio_eos_token", None) or "<|audio_eos|>"
        super().__init__(feature_extractor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, audio=None, return_tensors="pt", **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, return_tensors=None))
        if audio is not None:
            clips = [audio] if isinstance(audio, np.ndarray) and audio.ndim == 1 else list(audio)
            features = self.feature_extractor(
                [np.asarray(clip, dtype=np.float32).reshape(-1) for clip in clips],
                sampling_rate=self.feature_extractor.sampling_rate,
                padding=True,
                return_attention_mask=True,
                return_tensors="pt",
            )
            data["input_values"] = features["input_values"]
            data["audio_length"] = features["attention_mask"].sum(-1).long()
        return BatchFeature(data)
