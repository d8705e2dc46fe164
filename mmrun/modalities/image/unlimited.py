"""Baidu's Unlimited-OCR-2 (vLLM 0.34's multi-image example)."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "unlimited_ocr2",
    "image",
    repo_id="baidu/Unlimited-OCR-2",
    architecture="UnlimitedOCR2TextForCausalLM",
    engine_args={
        "attention_config": {"backend": "FLASH_ATTN"},
        "enable_chunked_prefill": True,
        "enable_prefix_caching": False,
        "max_model_len": 32768,
        "max_num_batched_tokens": 4096,
        "max_num_seqs": 2,
        "mm_encoder_attn_backend": "TORCH_SDPA",
    },
    # Long transcripts, with the page markers (special tokens) kept.
    sampling={"temperature": 0, "max_tokens": 4096, "skip_special_tokens": False},
    methods=("generate",),
    since="0.34",
    note="an OCR model: it transcribes each image as a page and ignores the question",
    source=UPSTREAM,
)
def unlimited_ocr2(ctx: LoaderContext) -> Prompt:
    return Prompt(text="<PAGE><image>" * ctx.num_items + "Multi page parsing.")
