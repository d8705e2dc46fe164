"""R-4B (YannQi)."""

from __future__ import annotations

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


# The seed passes trust_remote_code to AutoProcessor only, not to the engine, so the spec
# does not set it and the engine arguments equal the seed's. The engine does need it to
# load R-4B's config (upstream vLLM fixed its example in PR #29299).
@loader(
    "rvl",
    "image",
    repo_id="YannQi/R-4B",
    architecture="RForConditionalGeneration",
)
def rvl(ctx: LoaderContext) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args={"max_model_len": 16384, "max_num_seqs": 16},
        prompt=ctx.templates.render(messages, source="processor"),
    )
