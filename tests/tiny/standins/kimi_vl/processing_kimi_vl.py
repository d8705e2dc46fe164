# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Kimi-VL's remote processor (KimiVLProcessor), written from what vLLM 0.32's
kimi_vl.py reads and calls: ``image_token`` (the media placeholder, ``<|media_pad|>``), the
image processor, and a call on text and images that expands each placeholder to the image's
token count (patch rows x columns over the merge kernel) and returns the image processor's
outputs with the token ids."""

from transformers.feature_extraction_utils import BatchFeature
from transformers.processing_utils import ProcessorMixin


class KimiVLProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, chat_template=chat_template, **kwargs)
        self.image_token = "<|media_pad|>"

    def __call__(self, images=None, text=None, return_tensors=None, **kwargs):
        data = {}
        if images is not None:
            data.update(self.image_processor.preprocess(images).data)
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            if images is not None:
                kh, kw = self.image_processor.merge_kernel_size
                counts = iter(int(h * w) // (kh * kw) for h, w in data["image_grid_hws"].tolist())
                texts = [self._expand(t, counts) for t in texts]
            data.update(self.tokenizer(texts, add_special_tokens=False).data)
        return BatchFeature(data=data, tensor_type=return_tensors)

    def _expand(self, text, counts):
        pieces = text.split(self.image_token)
        out = pieces[0]
        for piece in pieces[1:]:
            out += self.image_token * next(counts) + piece
        return out
