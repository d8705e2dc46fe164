"""openPangu-VL on video."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "openpangu_vl",
    "video",
    repo_id="FreedomIntelligence/openPangu-VL-7B",
    architecture="OpenPanguVLForConditionalGeneration",
    engine_args={"max_model_len": 4096, "max_num_seqs": 4, "enforce_eager": True},
    trust_remote_code=True,
    min_items=1,
    max_items=1,
    companions=("image",),
    source=SINGLE_IMAGE,
)
def openpangu_vl(ctx: LoaderContext) -> Prompt:
    # [unused9]/[unused10] open and close a turn, [unused18]/[unused20] the media, [unused32]
    # is the video placeholder ([unused19] an image's, ahead of it); the role names are the
    # model's Chinese ones.
    image = "[unused19]" * ctx.companion("image")
    return Prompt(
        text="<s>[unused9]系统：[unused10][unused9]用户："  # noqa: RUF001
        f"[unused18]{image}[unused32][unused20]"
        f"{ctx.question}[unused10][unused9]助手："  # noqa: RUF001
    )
