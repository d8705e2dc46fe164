# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for R-4B's remote processor class (RProcessor), written from what vLLM 0.32's
rvl.py (through its LLaVA-NeXT processing) reads and calls: the image processor and a call on
``text`` and ``images`` whose image outputs are the any-resolution tiles of each image
(``pixel_values``: the base view, then the grid's tiles) and ``image_sizes`` (each image's
height and width). vLLM expands each ``<image>`` itself from the config's geometry, so the
text is only tokenized here; ``image_token`` names the placeholder."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class RProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<image>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, return_tensors=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images is not None:
            outputs = self.image_processor(images, return_tensors="pt")
            data["pixel_values"] = outputs["pixel_values"]
            data["image_sizes"] = outputs["image_sizes"]
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, add_special_tokens=False))
        return BatchFeature(data)
