"""NAVER HyperCLOVA X SEED Vision."""

from __future__ import annotations

from mmrun.registry import loader
from mmrun.request import LoaderContext, Message, Prompt

# The model's chat template reads each image part's OCR text and lens keywords; empty
# strings say the image comes without them.
_IMAGE_PART = {"type": "image", "ocr": "", "lens_keywords": "", "lens_local_keywords": ""}


@loader(
    "hyperclovax_seed_vision",
    "image",
    repo_id="naver-hyperclovax/HyperCLOVAX-SEED-Vision-Instruct-3B",
    architecture="HCXVisionForCausalLM",
    engine_args={"max_model_len": 16384},
    trust_remote_code=True,
    note="supported in vLLM only until v0.28.0; needs an older vLLM",
)
def hyperclovax_seed_vision(ctx: LoaderContext) -> Prompt:
    parts = [dict(_IMAGE_PART) for _ in range(ctx.num_items)]
    messages: list[Message] = [
        {"role": "user", "content": [*parts, {"type": "text", "text": ctx.question}]}
    ]
    return Prompt(text=ctx.templates.render(messages, source="tokenizer"))
