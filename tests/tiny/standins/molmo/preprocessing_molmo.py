# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo's remote processor class (MolmoProcessor), written from what vLLM 0.32's
molmo.py reads and calls: ``image_processor``, ``tokenizer``, ``get_tokens_input(prompt,
message_format, always_start_with_space)`` (the prompt's token ids, after a leading space) and
``process(text=..., images=..., tokens=...)``, which returns ``input_ids`` (one sequence that
starts with the BOS, here ``<|endoftext|>`` as the tokenizer has no BOS of its own, followed by
each image's tokens, then the text) and, for images, per crop the ``images`` patches,
``image_masks`` (1 for real pixels: these crops have no padding) and ``image_input_idx`` (for
each 2x2-pooled patch, the position in ``input_ids`` of the ``<im_patch>`` token it fills, -1
where it is dropped). An image's tokens are, as vLLM writes them: the whole-image crop's
``<im_start>``, rows of ``<im_patch>`` each closed by ``<im_col>``, ``<im_end>``, then the same
for the pooled grid of the tile crops."""

from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin

PATCH, COL, START, END = "<im_patch>", "<im_col>", "<im_start>", "<im_end>"


class MolmoProcessor(ProcessorMixin):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs: Any):
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def get_tokens_input(
        self, prompt: str, message_format: str = "none", always_start_with_space: bool = False
    ) -> list[int]:
        if message_format == "role":
            prompt = "User: " + prompt + " Assistant:"
        if always_start_with_space and not prompt.startswith(" "):
            prompt = " " + prompt
        return self.tokenizer.encode(prompt, add_special_tokens=False)

    def _image_tokens(self, image: Any, offset: int) -> tuple[list[int], np.ndarray, np.ndarray]:
        """One image's tokens, crops and pooled-patch positions (from ``offset``)."""
        ip = self.image_processor
        vocab = self.tokenizer.get_vocab()
        patch, col, start, end = (vocab[t] for t in (PATCH, COL, START, END))
        if not isinstance(image, Image.Image):
            image = Image.fromarray(np.asarray(image).astype(np.uint8))
        crops = ip.preprocess(image)
        grid_rows, grid_cols, tiles = ip.kept_pooled_patches(image.height, image.width)
        w, h = ip.image_token_length_w, ip.image_token_length_h

        # Position of pooled patch k of a rows x cols grid whose <im_start> sits at ``base``.
        def place(k: np.ndarray, cols: int, base: int) -> np.ndarray:
            return np.where(k >= 0, base + 1 + (k // cols) * (cols + 1) + k % cols, -1)

        tokens = [start] + ([patch] * w + [col]) * h + [end]
        whole = place(np.arange(w * h), w, offset)
        joint_base = offset + len(tokens)
        tokens += [start] + ([patch] * grid_cols + [col]) * grid_rows + [end]
        idx = np.stack([whole] + [place(t, grid_cols, joint_base) for t in tiles])
        return tokens, crops, idx

    def process(
        self,
        text: str | None = None,
        images: Any = None,
        *,
        tokens: list[int] | None = None,
        return_tensors: str | None = None,
        **kwargs: Any,
    ) -> BatchFeature:
        if tokens is None:
            tokens = self.get_tokens_input(text or "", "none", always_start_with_space=True)
        bos = self.tokenizer.bos_token_id
        if bos is None:
            bos = self.tokenizer.eos_token_id
        input_ids = [bos]
        data: dict[str, Any] = {}
        if images is not None:
            if not isinstance(images, (list, tuple)):
                images = [images]
            all_crops, all_idx = [], []
            for image in images:
                image_tokens, crops, idx = self._image_tokens(image, len(input_ids))
                input_ids += image_tokens
                all_crops.append(crops)
                all_idx.append(idx)
            crops = np.concatenate(all_crops)
            data["images"] = torch.from_numpy(crops)
            data["image_input_idx"] = torch.from_numpy(np.concatenate(all_idx))
            data["image_masks"] = torch.ones(crops.shape[:2], dtype=torch.float32)
        input_ids += list(tokens)
        data["input_ids"] = torch.tensor(input_ids, dtype=torch.long)
        return BatchFeature(data)
