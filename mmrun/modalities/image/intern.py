"""InternVL-style chat models: InternVL2, H2OVL-Mississippi, NVLM-D, Intern-S1, Intern-S1-Pro."""

from __future__ import annotations

from mmrun.prompts import numbered, text_messages
from mmrun.registry import CHANGED_UPSTREAM, SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# Fewer dynamic tiles per image keep several images within max_model_len.
_FEW_TILES = {"max_dynamic_patch": 4}

# InternVL2's conversation.py ends turns with any of these; variants differ.
INTERNVL_STOP_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|end|>")


def _intern_prompt(
    ctx: LoaderContext, image_token: str = "<image>", stop_token_ids: tuple[int, ...] = ()
) -> Prompt:
    placeholders = numbered(f"Image-{{i}}: {image_token}\n", ctx.num_items, "\n")
    messages = text_messages(f"{placeholders}\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"), stop_token_ids=stop_token_ids
    )


@loader(
    "h2ovl_chat",
    "image",
    repo_id="h2oai/h2ovl-mississippi-800m",
    architecture="H2OVLChatModel",
    engine_args={"max_model_len": 8192, "mm_processor_kwargs": _FEW_TILES},
    trust_remote_code=True,
)
def h2ovl_chat(ctx: LoaderContext) -> Prompt:
    return _intern_prompt(ctx, stop_token_ids=(ctx.templates.eos_token_id(),))


@loader(
    "interns1",
    "image",
    # vLLM's example moved to the mini checkpoint: Intern-S1 itself has ~241B parameters and
    # does not load with these settings on one GPU.
    repo_id="internlm/Intern-S1-mini",
    architecture="InternS1ForConditionalGeneration",
    engine_args={"max_model_len": 4096},
    trust_remote_code=True,
    source=CHANGED_UPSTREAM,
)
def interns1(ctx: LoaderContext) -> Prompt:
    return _intern_prompt(ctx, image_token="<IMG_CONTEXT>")


@loader(
    "internvl_chat",
    "image",
    repo_id="OpenGVLab/InternVL2-2B",
    architecture="InternVLChatModel",
    engine_args={"max_model_len": 4096, "mm_processor_kwargs": _FEW_TILES},
    trust_remote_code=True,
)
def internvl_chat(ctx: LoaderContext) -> Prompt:
    stop_token_ids = tuple(ctx.templates.token_id(t) for t in INTERNVL_STOP_TOKENS)
    return _intern_prompt(ctx, stop_token_ids=stop_token_ids)


@loader(
    "NVLM_D",
    "image",
    repo_id="nvidia/NVLM-D-72B",
    architecture="NVLM_D",
    engine_args={
        "max_model_len": 8192,
        "tensor_parallel_size": 4,
        "mm_processor_kwargs": _FEW_TILES,
    },
    trust_remote_code=True,
)
def nvlm_d(ctx: LoaderContext) -> Prompt:
    return _intern_prompt(ctx)


INTERNS1_PRO_ENGINE_ARGS = {
    "max_model_len": 8192,
    "max_num_seqs": 2,
    "enforce_eager": True,
    "tensor_parallel_size": 4,
}


def placeholder_first_prompt(
    ctx: LoaderContext, placeholder: str, stop_tokens: tuple[str, ...] = ()
) -> Prompt:
    """The tokenizer's chat template over one user turn: the placeholder, a newline and the
    question (what vLLM's single-image and video example writes for these models)."""
    messages = text_messages(f"{placeholder}\n{ctx.question}")
    return Prompt(
        text=ctx.templates.render(messages, source="tokenizer"),
        stop_token_ids=tuple(ctx.templates.token_id(t) for t in stop_tokens),
    )


@loader(
    "interns1_pro",
    "image",
    repo_id="internlm/Intern-S1-Pro",
    architecture="InternS1ProForConditionalGeneration",
    engine_args=INTERNS1_PRO_ENGINE_ARGS,
    trust_remote_code=True,
    max_items=1,
    source=SINGLE_IMAGE,
)
def interns1_pro(ctx: LoaderContext) -> Prompt:
    return placeholder_first_prompt(ctx, "<|vision_start|><|image_pad|><|vision_end|>")
