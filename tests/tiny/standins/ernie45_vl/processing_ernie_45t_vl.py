# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for ERNIE-4.5-VL's remote processor class (Ernie_45T_VLProcessor), written from
what vLLM 0.32's ernie45_vl.py reads and calls: ``image_processor``, ``spatial_conv_size``,
``temporal_conv_size`` and a call on ``text``/``images``/``videos`` that returns the image
processor's ``images`` and ``grid_thw``. vLLM expands each ``<|image@placeholder|>`` /
``<|video@placeholder|>`` itself, so the text is only tokenized here."""

from typing import Any

from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class Ernie_45T_VLProcessor(ProcessorMixin):
    def __init__(
        self,
        image_processor=None,
        tokenizer=None,
        chat_template=None,
        spatial_conv_size: int = 2,
        temporal_conv_size: int = 2,
        **kwargs: Any,
    ):
        self.spatial_conv_size = spatial_conv_size
        self.temporal_conv_size = temporal_conv_size
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, text=None, images=None, videos=None, **kwargs: Any) -> BatchFeature:
        data: dict[str, Any] = {}
        if images or videos:
            data.update(self.image_processor(images=images, videos=videos))
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, return_tensors=None))
        return BatchFeature(data)
