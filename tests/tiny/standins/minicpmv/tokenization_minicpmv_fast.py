# Remote code for a checkpoint, run by whatever transformers loads it.
# mypy: ignore-errors
"""STAND-IN for MiniCPM-V 2.6's remote fast tokenizer (``MiniCPMVTokenizerFast``), written from
what vLLM 0.32 reads: its MiniCPMVProcessor (vllm/transformers_utils/processors/minicpmv.py)
finds each image's bounds by ``im_start_id`` / ``im_end_id`` (the ids of ``<image>`` and
``</image>``) and puts ``bos_token_id`` before the text; minicpmv.py looks ``<unk>`` up in the
vocabulary (the positions of the image features). The vocabulary and merges come from the
checkpoint's tokenizer.json, as for any fast tokenizer; the other ids are the real class's
named tokens (slices, image ids, newline)."""

from transformers import PreTrainedTokenizerFast


class MiniCPMVTokenizerFast(PreTrainedTokenizerFast):
    im_start = "<image>"
    im_end = "</image>"
    slice_start = "<slice>"
    slice_end = "</slice>"
    im_id_start = "<image_id>"
    im_id_end = "</image_id>"

    def _id(self, token: str) -> int:
        return self.convert_tokens_to_ids(token)

    @property
    def eos_id(self) -> int:
        return self.eos_token_id

    @property
    def bos_id(self) -> int:
        return self.bos_token_id

    @property
    def unk_id(self) -> int:
        return self._id("<unk>")

    @property
    def im_start_id(self) -> int:
        return self._id(self.im_start)

    @property
    def im_end_id(self) -> int:
        return self._id(self.im_end)

    @property
    def slice_start_id(self) -> int:
        return self._id(self.slice_start)

    @property
    def slice_end_id(self) -> int:
        return self._id(self.slice_end)

    @property
    def im_id_start_id(self) -> int:
        return self._id(self.im_id_start)

    @property
    def im_id_end_id(self) -> int:
        return self._id(self.im_id_end)

    @property
    def newline_id(self) -> int:
        return self.encode("\n", add_special_tokens=False)[0]
