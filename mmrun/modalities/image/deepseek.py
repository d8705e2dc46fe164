"""DeepSeek vision models: DeepSeek-VL2."""

from __future__ import annotations

from mmrun.modalities._shapes import numbered
from mmrun.registry import loader
from mmrun.request import LoaderContext, ModelRequest


@loader(
    "deepseek_vl_v2",
    "image",
    repo_id="deepseek-ai/deepseek-vl2-tiny",
    architecture="DeepseekVLV2ForCausalLM",
)
def deepseek_vl_v2(ctx: LoaderContext) -> ModelRequest:
    placeholders = numbered("image_{i}:<image>\n", ctx.num_items)
    return ModelRequest(
        engine_args={
            "max_model_len": 4096,
            "max_num_seqs": 2,
            # The repository's config.json declares no architecture.
            "hf_overrides": {"architectures": ["DeepseekVLV2ForCausalLM"]},
        },
        prompt=f"<|User|>: {placeholders}{ctx.question}\n\n<|Assistant|>:",
    )
