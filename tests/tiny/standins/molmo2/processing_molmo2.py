# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for Molmo2's remote processor class (Molmo2Processor), written from what vLLM 0.32's
molmo2.py reads and calls: ``image_processor``, ``video_processor``, ``tokenizer``, the flags
``image_use_col_tokens``, ``use_single_crop_col_tokens``, ``use_single_crop_start_token``,
``video_use_col_tokens`` and ``use_frame_special_tokens``, and a call on
``text``/``images``/``videos``/``video_metadata`` (with ``do_sample_frames``) that returns the
image and video processors' outputs and ``input_ids`` (a batch of one sequence, the BOS first,
or the EOS where the tokenizer has none).

In ``input_ids`` each ``<|image|>`` becomes the image's tokens, as vLLM writes them: the
low-resolution view (``<low_res_im_start>``, rows of ``<im_patch>``, each closed by
``<im_col>`` where the flags say so, ``<im_end>``), then the high-resolution grid between
``<im_start>`` and ``<im_end>``. The ``<|video|>`` becomes, per frame, its time in seconds
("0.0 ", then " 0.5 " and so on) and the frame's rows of ``<im_patch>`` between
``<frame_start>`` and ``<frame_end>``. vLLM re-expands the placeholders itself and uses these
ids only to carry a clip's text into the prompt, so they need to match its own."""

import re
from typing import Any

import numpy as np
import torch
from transformers import BatchFeature
from transformers.processing_utils import ProcessorMixin

IMAGE_PROMPT, VIDEO_PROMPT = "<|image|>", "<|video|>"
PATCH, COL, START, END = "<im_patch>", "<im_col>", "<im_start>", "<im_end>"
LOW_RES_START, FRAME_START, FRAME_END = "<low_res_im_start>", "<frame_start>", "<frame_end>"
_PLACEHOLDERS = "(" + re.escape(IMAGE_PROMPT) + "|" + re.escape(VIDEO_PROMPT) + ")"


def _field(metadata: Any, name: str) -> Any:
    return metadata.get(name) if isinstance(metadata, dict) else getattr(metadata, name, None)


def _flatten(items: Any) -> list[Any]:
    """A batch of items, possibly nested one level per prompt: the flat list of items."""
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        return [items]
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)) and item and not np.isscalar(item[0]):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out


class Molmo2Processor(ProcessorMixin):
    def __init__(
        self,
        image_processor=None,
        video_processor=None,
        tokenizer=None,
        chat_template=None,
        image_use_col_tokens: bool = True,
        use_single_crop_col_tokens: bool | None = None,
        use_single_crop_start_token: bool = True,
        video_use_col_tokens: bool = False,
        use_frame_special_tokens: bool = True,
        **kwargs: Any,
    ):
        self.image_use_col_tokens = image_use_col_tokens
        self.use_single_crop_col_tokens = use_single_crop_col_tokens
        self.use_single_crop_start_token = use_single_crop_start_token
        self.video_use_col_tokens = video_use_col_tokens
        self.use_frame_special_tokens = use_frame_special_tokens
        super().__init__(image_processor, video_processor, tokenizer, chat_template=chat_template)

    # Tokens -----------------------------------------------------------------------------------

    def _ids(self, *tokens: str) -> list[int]:
        vocab = self.tokenizer.get_vocab()
        return [vocab[t] for t in tokens]

    def _grid(self, rows: int, cols: int, col_tokens: bool) -> list[int]:
        patch, col = self._ids(PATCH, COL)
        return ([patch] * cols + [col] * int(col_tokens)) * rows

    def _image_tokens(self, grid: list[int]) -> list[int]:
        low_rows, low_cols, rows, cols = grid
        start, end, low_start = self._ids(START, END, LOW_RES_START)
        low_col = self.use_single_crop_col_tokens
        if low_col is None:
            low_col = self.image_use_col_tokens
        first = low_start if self.use_single_crop_start_token else start
        return [
            first,
            *self._grid(low_rows, low_cols, low_col),
            end,
            start,
            *self._grid(rows, cols, self.image_use_col_tokens),
            end,
        ]

    def _video_tokens(self, grid: list[int], times: list[float]) -> list[int]:
        _, rows, cols = grid
        if self.use_frame_special_tokens:
            start, end = self._ids(FRAME_START, FRAME_END)
        else:
            start, end = self._ids(START, END)
        out: list[int] = []
        for k, time in enumerate(times):
            prefix = (" " if k else "") + f"{time:.1f} "
            out += self.tokenizer.encode(prefix, add_special_tokens=False)
            out += [start, *self._grid(rows, cols, self.video_use_col_tokens), end]
        return out

    def _times(self, clip: Any, metadata: Any, sampled: bool) -> list[float]:
        """The time in seconds of each frame the video processor keeps."""
        total = len(clip)
        fps = _field(metadata, "fps") if metadata is not None else None
        fps = float(fps) if fps else 1.0
        if sampled:
            indices = self.video_processor.sampled_indices(total)
        else:
            indices = _field(metadata, "frames_indices") if metadata is not None else None
            if indices is None:
                indices = range(total)
        return [float(i) / fps for i in indices]

    # Call -------------------------------------------------------------------------------------

    def __call__(
        self,
        text: Any = None,
        images: Any = None,
        videos: Any = None,
        video_metadata: Any = None,
        do_sample_frames: bool | None = None,
        return_tensors: Any = None,
        **kwargs: Any,
    ) -> BatchFeature:
        if isinstance(text, (list, tuple)):
            text = "".join(text)
        text = text or ""
        data: dict[str, Any] = {}
        image_tokens: list[list[int]] = []
        video_tokens: list[list[int]] = []
        images = _flatten(images)
        if images:
            out = self.image_processor.preprocess(images)
            data.update(out)
            image_tokens = [self._image_tokens(g) for g in out["image_grids"].tolist()]
        clips = _flatten(videos)
        if clips:
            sampled = self.video_processor.do_sample_frames
            if do_sample_frames is not None:
                sampled = do_sample_frames
            out = self.video_processor.preprocess(clips, do_sample_frames=sampled)
            data.update(out)
            metadata = _flatten(video_metadata) or [None] * len(clips)
            for clip, meta, grid in zip(clips, metadata, out["video_grids"].tolist(), strict=True):
                video_tokens.append(self._video_tokens(grid, self._times(clip, meta, sampled)))

        bos = self.tokenizer.bos_token_id
        if bos is None:
            bos = self.tokenizer.eos_token_id
        input_ids = [bos]
        image_index = video_index = 0
        # The text split on both placeholders, which the split keeps, in order.
        for piece in re.split(_PLACEHOLDERS, text):
            if piece == IMAGE_PROMPT and image_index < len(image_tokens):
                input_ids += image_tokens[image_index]
                image_index += 1
            elif piece == VIDEO_PROMPT and video_index < len(video_tokens):
                input_ids += video_tokens[video_index]
                video_index += 1
            elif piece:
                input_ids += self.tokenizer.encode(piece, add_special_tokens=False)
        data["input_ids"] = torch.tensor([input_ids], dtype=torch.long)
        return BatchFeature(data)
