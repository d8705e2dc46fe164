# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-4-reasoning-vision's remote processor class, written from what vLLM 0.32's
phi4siglip.py reads and calls: a call on ``text`` and ``images`` whose image outputs are the
SigLIP 2 NaFlex image processor's (``pixel_values``: each image's patches, flattened and padded
to the same count; ``pixel_attention_mask``: which of them are real; ``spatial_shapes``: each
image's patch rows and columns, whose product vLLM expands ``<image>`` to). vLLM expands the
placeholders itself, so the text is only tokenized here."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class Phi4SiglipProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<image>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, return_tensors=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images is not None:
            outputs = self.image_processor(images, return_tensors="pt")
            for key in ("pixel_values", "pixel_attention_mask", "spatial_shapes"):
                data[key] = outputs[key]
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, add_special_tokens=False))
        return BatchFeature(data)
