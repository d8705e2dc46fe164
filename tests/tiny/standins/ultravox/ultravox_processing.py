# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Ultravox's remote processor class (UltravoxProcessor), written from what vLLM
0.32's ultravox.py reads and calls: an ``audio_processor`` that is a Whisper feature
extractor (loaded from the folder the audio config's ``_name_or_path`` names), and a call on
``text``/``audios`` (with ``sampling_rate`` and ``include_audio_num_chunks``) that cuts each
clip into chunks of the feature extractor's ``chunk_length`` and returns per chunk the log-mel
features (``audio_values``), their valid frame count (``audio_lens``) and the number of text
positions the projector makes of them (``audio_token_len``: the Whisper encoder halves the
frames, the projector stacks ``stack_factor`` of them), plus ``audio_num_chunks`` per clip.
vLLM expands each ``<|audio|>`` itself from ``audio_token_len``, so the text is only tokenized."""

import math
from typing import Any

import numpy as np
import torch
from transformers import AutoConfig, AutoProcessor, AutoTokenizer, BatchFeature
from transformers.processing_utils import ProcessorMixin


class UltravoxProcessor(ProcessorMixin):
    def __init__(
        self,
        audio_processor=None,
        tokenizer=None,
        stack_factor: int = 8,
        encoder_ds_factor: int = 2,
        audio_placeholder: str = "<|audio|>",
        chat_template=None,
        **kwargs: Any,
    ):
        self.stack_factor = stack_factor
        self.encoder_ds_factor = encoder_ds_factor
        self.audio_placeholder = audio_placeholder
        super().__init__(audio_processor, tokenizer, chat_template=chat_template)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs: Any):
        config = AutoConfig.from_pretrained(pretrained_model_name_or_path, trust_remote_code=True)
        audio_processor = AutoProcessor.from_pretrained(config.audio_config._name_or_path)
        tokenizer = kwargs.get("tokenizer") or AutoTokenizer.from_pretrained(
            pretrained_model_name_or_path
        )
        return cls(
            audio_processor=audio_processor,
            tokenizer=tokenizer,
            stack_factor=config.stack_factor,
        )

    def _token_len(self, frames: int) -> int:
        encoder_frames = (frames - 1) // self.encoder_ds_factor + 1
        return math.ceil(encoder_frames / self.stack_factor)

    def __call__(
        self,
        text=None,
        audios=None,
        sampling_rate=None,
        include_audio_num_chunks: bool = False,
        return_tensors="pt",
        **kwargs: Any,
    ) -> BatchFeature:
        data: dict[str, Any] = {}
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, add_special_tokens=False, return_tensors=None))
        if audios is not None:
            extractor = self.audio_processor
            rate = sampling_rate or extractor.sampling_rate
            clips = [audios] if isinstance(audios, np.ndarray) and audios.ndim == 1 else audios
            chunk = extractor.chunk_length * rate
            pieces, num_chunks = [], []
            for clip in clips:
                clip = np.asarray(clip, dtype=np.float32).reshape(-1)
                parts = [clip[i : i + chunk] for i in range(0, max(len(clip), 1), chunk)]
                pieces.extend(parts)
                num_chunks.append(len(parts))
            features = extractor(
                pieces,
                sampling_rate=rate,
                padding="longest",
                return_attention_mask=True,
                return_tensors="pt",
            )
            lens = features["attention_mask"].sum(-1).long()
            data["audio_values"] = features["input_features"]
            data["audio_lens"] = lens
            data["audio_token_len"] = torch.tensor([self._token_len(int(n)) for n in lens])
            if include_audio_num_chunks:
                data["audio_num_chunks"] = torch.tensor(num_chunks, dtype=torch.long)
        return BatchFeature(data)
