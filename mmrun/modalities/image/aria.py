"""Aria (Rhymes AI)."""

from __future__ import annotations

from mmrun.prompts import chatml
from mmrun.registry import Since, loader
from mmrun.request import LoaderContext, Prompt

# Aria ends a turn with tokens its tokenizer does not declare as EOS, so vLLM's example lists
# their ids. 93653 appears twice there; it is kept so the request equals the example's.
ARIA_STOP_TOKEN_IDS = (93532, 93653, 944, 93421, 1019, 93653, 93519)


@loader(
    "aria",
    "image",
    repo_id="rhymes-ai/Aria",
    architecture="AriaForConditionalGeneration",
    # Deliberate deviation from vLLM's example: it also sets tokenizer_mode="slow", a mode current
    # vLLM no longer has (0.32 rejects it: only auto, hf, mistral, ... remain), so mmrun
    # leaves the default ("auto", the model's Hugging Face tokenizer).
    engine_args={"dtype": "bfloat16"},
    trust_remote_code=True,
    changes=(
        Since(
            "0.34",
            "vLLM 0.34 runs Aria on its Transformers backend, without the repository's code",
            trust_remote_code=False,
        ),
    ),
)
def aria(ctx: LoaderContext) -> Prompt:
    placeholders = "<fim_prefix><|img|><fim_suffix>\n" * ctx.num_items
    return Prompt(text=chatml(f"{placeholders}{ctx.question}"), stop_token_ids=ARIA_STOP_TOKEN_IDS)
