"""R-4B (YannQi)."""

from __future__ import annotations

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


# Deliberate deviation from the seed: it passes trust_remote_code to AutoProcessor only,
# but the engine needs it too to load R-4B's config (upstream vLLM fixed its example in
# PR #29299), so the spec sets it and the engine gets it as for every remote-code model.
@loader(
    "rvl",
    "image",
    repo_id="YannQi/R-4B",
    architecture="RForConditionalGeneration",
    trust_remote_code=True,
)
def rvl(ctx: LoaderContext) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args={"max_model_len": 16384, "max_num_seqs": 16},
        prompt=ctx.templates.render(messages, source="processor"),
    )
