# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-1.5's remote processor class, written from what vLLM 0.32's
keye_vl1_5.py reads and calls: ``image_processor``, ``image_token``/``video_token``
(``<|image_pad|>``/``<|video_pad|>``), ``frame_token`` (tokenised before each frame's video
tokens), ``fast_start``/``fast_end`` (around a frame that vLLM is told is a fast-pathway one)
and a call on ``text``/``images``/``videos`` that returns the image processor's outputs
(``num_frames`` included for videos). vLLM expands each pad token itself from the grids, so the
text is only tokenised here. The frame and fast-pathway token strings are this stand-in's own."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KeyeVL1_5Processor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<|image_pad|>"
        self.video_token = "<|video_pad|>"
        self.frame_token = "<|frame|>"
        self.fast_start = "<|fast_start|>"
        self.fast_end = "<|fast_end|>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images is not None or videos is not None:
            bounds = {k: kwargs[k] for k in ("size", "min_pixels", "max_pixels") if k in kwargs}
            data.update(self.image_processor(images=images, videos=videos, **bounds))
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, return_tensors=None))
        return BatchFeature(data)
