"""R-4B (YannQi)."""

from __future__ import annotations

from mmrun.prompts import template_prompt
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "rvl",
    "image",
    repo_id="YannQi/R-4B",
    architecture="RForConditionalGeneration",
    engine_args={"max_model_len": 16384, "max_num_seqs": 16},
    # Deliberate deviation from vLLM's example: it passes trust_remote_code to AutoProcessor only,
    # but the engine needs it too to load R-4B's config (upstream vLLM fixed its example in
    # PR #29299), so the spec sets it and the engine gets it as for every remote-code model.
    trust_remote_code=True,
)
def rvl(ctx: LoaderContext) -> Prompt:
    return template_prompt(ctx, "image")
