# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for HyperCLOVA X SEED Vision's remote processor class, written from how vLLM 0.28's
hyperclovax_vision.py calls it: once with the text alone (the prompt's token ids, each image
still one ``<|dummy3|>`` token, which vLLM expands itself), once with the media alone as a
batch of one (``images=[[image, ...]]``), whose outputs are lists with one entry per batch
item, each a list with one entry per image (see image_processing_hyperclovax.py). Videos are
not part of this stand-in."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class HCXProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        self.image_token = "<|dummy3|>"
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(
        self, text=None, images=None, videos=None, return_tensors=None, **kwargs: Any
    ) -> BatchFeature:
        if videos is not None and any(len(batch) for batch in videos):
            raise NotImplementedError("the stand-in processor takes images only")
        data: dict[str, Any] = {}
        if images is not None:
            for key in ("pixel_values_images", "image_sizes_images", "vision_query_lengths_images"):
                data[key] = []
            for batch in images:
                out = self.image_processor(list(batch))
                for key in out:
                    data[key].append(out[key])
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, return_tensors=return_tensors))
        return BatchFeature(data)
