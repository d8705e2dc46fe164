"""OpenBMB MiniCPM-V 2.6 and MiniCPM-o 2.6 on video."""

from __future__ import annotations

from mmrun.modalities.image.minicpm import (
    MINICPM_ENGINE_ARGS,
    MINICPM_IMAGE,
    MINICPM_VIDEO,
    minicpm_prompt,
)
from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "minicpmo",
    "video",
    repo_id="openbmb/MiniCPM-o-2_6",
    architecture="MiniCPMO",
    engine_args=MINICPM_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def minicpmo(ctx: LoaderContext) -> Prompt:
    return minicpm_prompt(ctx, f"{MINICPM_IMAGE}\n" * ctx.companion("image") + MINICPM_VIDEO)


@loader(
    "minicpmv",
    "video",
    repo_id="openbmb/MiniCPM-V-2_6",
    architecture="MiniCPMV",
    engine_args=MINICPM_ENGINE_ARGS,
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def minicpmv(ctx: LoaderContext) -> Prompt:
    return minicpm_prompt(ctx, f"{MINICPM_IMAGE}\n" * ctx.companion("image") + MINICPM_VIDEO)
