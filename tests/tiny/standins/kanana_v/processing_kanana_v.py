# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kanana-V's remote processor class, written from what vLLM 0.32's kanana_v.py
uses of it: only its ``image_processor`` (vLLM calls the image processor on each image and
the tokenizer itself, and puts the image tokens, the id after the text config's
``eos_token_id``, in place of each ``<image>``). The call here only gathers the image
processor's outputs and tokenizes the text as it is."""

from typing import Any

import torch
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KananaVProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<image>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, return_tensors=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images is not None:
            items = images if isinstance(images, (list, tuple)) else [images]
            outputs = [self.image_processor(image) for image in items]
            data["pixel_values"] = torch.cat([o["pixel_values"] for o in outputs])
            for key in ("vision_grid_thw", "image_token_thw"):
                data[key] = torch.tensor([o["image_meta"][key] for o in outputs])
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts))
        return BatchFeature(data)
