"""DeepSeek vision models: DeepSeek-VL2, DeepSeek-OCR, DeepSeek-OCR 2."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import SINGLE_IMAGE, UPSTREAM, Since, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "deepseek_vl_v2",
    "image",
    repo_id="deepseek-ai/deepseek-vl2-tiny",
    architecture="DeepseekVLV2ForCausalLM",
    engine_args={
        "max_model_len": 4096,
        "max_num_seqs": 2,
        # The repository's config.json declares no architecture.
        "hf_overrides": {"architectures": ["DeepseekVLV2ForCausalLM"]},
    },
)
def deepseek_vl_v2(ctx: LoaderContext) -> Prompt:
    placeholders = numbered("image_{i}:<image>\n", ctx.num_items)
    return Prompt(text=f"<|User|>: {placeholders}{ctx.question}\n\n<|Assistant|>:")


# DeepSeek-OCR's n-gram repetition guard: a vLLM logits processor, named by its qualified class
# name (vLLM loads "<module>:<class>" itself), so that no loader imports vLLM.
NGRAM_LOGITS_PROCESSOR = "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"

# DeepSeek's own OCR settings, as vLLM's examples give them: the n-gram guard's arguments
# (its whitelist: the ids of <td> and </td>), long outputs, special tokens kept.
DEEPSEEK_OCR_SAMPLING = {
    "temperature": 0.0,
    "max_tokens": 8192,
    "extra_args": {
        "ngram_size": 30,
        "window_size": 90,
        "whitelist_token_ids": [128821, 128822],
    },
    "skip_special_tokens": False,
}

# vLLM 0.34 deleted the n-gram logits processor (and the adapter that ran it): naming it there
# fails at engine start, and its arguments have nothing to read them.
WITHOUT_NGRAM_GUARD = Since(
    "0.34",
    "vLLM 0.34 has no n-gram logits processor",
    drop_engine_args=("logits_processors",),
    drop_sampling=("extra_args",),
)


@loader(
    "deepseek_ocr",
    "image",
    repo_id="deepseek-ai/DeepSeek-OCR",
    architecture="DeepseekOCRForCausalLM",
    engine_args={"max_num_seqs": 2, "logits_processors": [NGRAM_LOGITS_PROCESSOR]},
    # vLLM 0.33's multi-image example applies them only in its chat path; mmrun applies them to
    # both methods, as its single-image example (and 0.34's multi-image example) does.
    sampling=DEEPSEEK_OCR_SAMPLING,
    changes=(WITHOUT_NGRAM_GUARD,),
    source=UPSTREAM,
)
def deepseek_ocr(ctx: LoaderContext) -> Prompt:
    return Prompt(text="<image>\n" * ctx.num_items + ctx.question)


@loader(
    "deepseek_ocr2",
    "image",
    repo_id="deepseek-ai/DeepSeek-OCR-2",
    architecture="DeepseekOCR2ForCausalLM",
    engine_args={"logits_processors": [NGRAM_LOGITS_PROCESSOR]},
    sampling=DEEPSEEK_OCR_SAMPLING,
    changes=(WITHOUT_NGRAM_GUARD,),
    max_items=1,
    source=SINGLE_IMAGE,
)
def deepseek_ocr2(ctx: LoaderContext) -> Prompt:
    return Prompt(text=f"<image>\n{ctx.question}")
