"""Kwai Keye-VL models: Keye-VL Preview, Keye-VL 1.5."""

from __future__ import annotations

from mmrun.modalities._shapes import media_first_messages
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


def _keye_request(ctx: LoaderContext) -> ModelRequest:
    messages = media_first_messages("image", ctx.num_items, ctx.question)
    return ModelRequest(
        engine_args={"max_model_len": 8192, "max_num_seqs": 5},
        prompt=ctx.templates.render(messages, source="processor"),
    )


@loader(
    "keye_vl",
    "image",
    repo_id="Kwai-Keye/Keye-VL-8B-Preview",
    architecture="KeyeForConditionalGeneration",
    trust_remote_code=True,
)
def keye_vl(ctx: LoaderContext) -> ModelRequest:
    return _keye_request(ctx)


@loader(
    "keye_vl1_5",
    "image",
    repo_id="Kwai-Keye/Keye-VL-1_5-8B",
    architecture="KeyeVL1_5ForConditionalGeneration",
    trust_remote_code=True,
)
def keye_vl1_5(ctx: LoaderContext) -> ModelRequest:
    return _keye_request(ctx)
