"""Huawei openPangu vision models: openPangu-VL."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, Prompt

# openPangu's turn markers, as vLLM's example writes them: [unused9] opens a turn, [unused10]
# closes it, and the roles are 系统 (system), 用户 (user), 助手 (assistant) with a fullwidth colon.
_SYSTEM = "[unused9]\u7cfb\u7edf\uff1a[unused10]"
_USER = "[unused9]\u7528\u6237\uff1a"
_ASSISTANT = "[unused10][unused9]\u52a9\u624b\uff1a"
_IMAGE = "[unused18][unused19][unused20]"  # each image: start, image, end


@loader(
    "openpangu_vl",
    "image",
    repo_id="FreedomIntelligence/openPangu-VL-7B",
    architecture="OpenPanguVLForConditionalGeneration",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2, "enforce_eager": True},
    trust_remote_code=True,
    source=UPSTREAM,
)
def openpangu_vl(ctx: LoaderContext) -> Prompt:
    # The images come after the question.
    images = _IMAGE * ctx.num_items
    return Prompt(text=f"<s>{_SYSTEM}{_USER}{ctx.question}{images}{_ASSISTANT}")
