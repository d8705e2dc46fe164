"""DeepSeek vision models: DeepSeek-VL2."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, Prompt


@loader(
    "deepseek_vl_v2",
    "image",
    repo_id="deepseek-ai/deepseek-vl2-tiny",
    architecture="DeepseekVLV2ForCausalLM",
    engine_args={
        "max_model_len": 4096,
        "max_num_seqs": 2,
        # The repository's config.json declares no architecture.
        "hf_overrides": {"architectures": ["DeepseekVLV2ForCausalLM"]},
    },
)
def deepseek_vl_v2(ctx: LoaderContext) -> Prompt:
    placeholders = numbered("image_{i}:<image>\n", ctx.num_items)
    return Prompt(text=f"<|User|>: {placeholders}{ctx.question}\n\n<|Assistant|>:")
