# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-3.5-vision's remote processor, written from what vLLM 0.32's phi3v.py
reads and calls: ``img_tokens`` (the ``<|image_i|>`` tags, numbered from 1),
``calc_num_image_tokens_from_image_size`` and a call on text and images whose image outputs
come from the image processor (vLLM tokenizes and expands the prompt itself)."""

from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


class _Tags:
    """``<|image_1|>``, ``<|image_2|>``, ... by index or slice, without a length limit."""

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(index.stop)[index]]
        return f"<|image_{index + 1}|>"


class Phi3VProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, **kwargs) -> None:
        super().__init__(image_processor, tokenizer, **kwargs)
        self.img_tokens = _Tags()

    def calc_num_image_tokens_from_image_size(self, width, height):
        return self.image_processor.calc_num_image_tokens_from_image_size(width, height)

    def __call__(self, text=None, images=None, return_tensors=None, num_crops=None, **kwargs):
        data = {}
        if images is not None:
            data.update(self.image_processor.preprocess(images, num_crops=num_crops).data)
        if text is not None:
            data.update(self.tokenizer(text, add_special_tokens=False).data)
        return BatchFeature(data=data, tensor_type=return_tensors)
