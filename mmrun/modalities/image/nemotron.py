"""NVIDIA Nemotron vision models: Nemotron Nano VL, Nemotron Parse 3.5 (single-image example)."""

from __future__ import annotations

from mmrun.modalities.image.intern import INTERNVL_STOP_TOKENS
from mmrun.prompts import text_messages
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "nemotron_vl",
    "image",
    repo_id="nvidia/Llama-3.1-Nemotron-Nano-VL-8B-V1",
    architecture="Llama_Nemotron_Nano_VL",
    engine_args={"max_model_len": 8192},
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def nemotron_vl(ctx: LoaderContext) -> Prompt:
    # An InternVL-style model: vLLM's example stops on InternVL's turn-ending tokens.
    messages = text_messages(f"<image>\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in INTERNVL_STOP_TOKENS),
    )


@loader(
    "nemotron_parse_35",
    "image",
    repo_id="nvidia/Nemotron-3.5-Parse",
    architecture="NemotronParseForConditionalGeneration",
    engine_args={"dtype": "bfloat16", "max_model_len": 16384, "max_num_seqs": 1},
    # The model's own decoding: greedy, a light repetition penalty, a page's worth of tokens,
    # and the layout tokens (boxes, classes) kept in the output.
    sampling={
        "temperature": 0,
        "top_k": 1,
        "repetition_penalty": 1.1,
        "max_tokens": 8744,
        "skip_special_tokens": False,
    },
    trust_remote_code=True,
    max_items=1,
    note="a document parser: it returns the page's layout and text, whatever the question",
    source=SINGLE_IMAGE,
)
def nemotron_parse_35(ctx: LoaderContext) -> Prompt:
    # One <pad> per image, which the Parse processor expands into the image's tokens, then the
    # task tokens: boxes, classes, markdown, text inside pictures.
    return Prompt(
        text="<pad></s><s><predict_bbox><predict_classes><output_markdown><predict_text_in_pic>"
    )
