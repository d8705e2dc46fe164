# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Keye-VL-8B-Preview's remote processor class (KeyeProcessor), written from what
vLLM 0.32's keye.py reads and calls: ``image_processor``, ``image_token``/``video_token``
(``<|image_pad|>``/``<|video_pad|>``) and a call on ``text``/``images``/``videos`` that
returns the image processor's outputs. vLLM expands each pad token itself (grid t*h*w over
merge_size squared), so the text is only tokenized here."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KeyeProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<|image_pad|>"
        self.video_token = "<|video_pad|>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images is not None or videos is not None:
            data.update(self.image_processor(images=images, videos=videos))
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, return_tensors=None))
        return BatchFeature(data)
