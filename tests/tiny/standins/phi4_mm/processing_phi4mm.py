# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Phi-4-multimodal's remote processor class, written from what vLLM 0.32's
phi4mm.py reads and calls:

- ``image_processor``: its ``dynamic_hd`` (the most crops per image) and
  ``find_closest_aspect_ratio``; here transformers' Phi-4-multimodal image processor;
- ``audio_processor``: its ``sampling_rate``; here transformers' Phi-4-multimodal feature
  extractor (80 log-mel bins, 10 ms hop at 16 kHz);
- a call on ``text``, ``images`` and ``audios`` (a list of (waveform, sampling rate) pairs)
  returning ``input_image_embeds`` (each image's crops, the global one first, padded to the
  same count), ``image_sizes`` (each resized image's height and width),
  ``image_attention_mask`` (each crop's 32 x 32 patch mask) and ``input_audio_embeds`` (the
  log-mel features, padded). vLLM expands the ``<|image_i|>`` and ``<|audio_i|>`` tags itself,
  so the text is only tokenized here."""

import torch
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin


class Phi4MMProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, audio_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, audio_processor, tokenizer, **kwargs)

    def __call__(
        self, text=None, images=None, audios=None, return_tensors=None, dynamic_hd=None, **kwargs
    ):
        data = {}
        if images is not None:
            hd = self.image_processor.dynamic_hd if dynamic_hd is None else dynamic_hd
            outputs = self.image_processor(images, dynamic_hd=hd, return_tensors="pt")
            data["input_image_embeds"] = outputs["image_pixel_values"]
            data["image_sizes"] = outputs["image_sizes"]
            data["image_attention_mask"] = outputs["image_attention_mask"]
        else:
            # vLLM reads the image sizes of every call, audio-only ones included.
            data["image_sizes"] = torch.zeros((0, 2), dtype=torch.long)
        if audios is not None:
            waveforms = [waveform for waveform, _ in audios]
            rate = self.audio_processor.sampling_rate
            outputs = self.audio_processor(waveforms, sampling_rate=rate, return_tensors="pt")
            data["input_audio_embeds"] = outputs["audio_input_features"]
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            data.update(self.tokenizer(texts, add_special_tokens=False).data)
        return BatchFeature(data=data, tensor_type=return_tensors)
