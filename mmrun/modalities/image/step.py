"""StepFun vision models: Step3, Step3-VL."""

from __future__ import annotations

from mmrun.registry import UPSTREAM, Since, loader
from mmrun.request import LoaderContext, Prompt

# The prompt opens the reasoning block itself; the "step3" reasoning parser splits it off.
# The BOS token is spelled with fullwidth bars and U+2581, as in Step3's tokenizer.
_STEP3_PROMPT = (
    "<｜begin▁of▁sentence｜> You are a helpful assistant. <|BOT|>user\n "  # noqa: RUF001
    "{images}{question} <|EOT|><|BOT|>assistant\n<think>\n"
)


@loader(
    "step3",
    "image",
    repo_id="stepfun-ai/step3-fp8",
    architecture="Step3VLForConditionalGeneration",
    engine_args={
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.85,
        "tensor_parallel_size": 8,
        "reasoning_parser": "step3",
    },
    changes=(
        Since(
            "0.34",
            "vLLM 0.34's example leaves the memory fraction to vLLM",
            drop_engine_args=("gpu_memory_utilization",),
        ),
    ),
    note="vLLM's example shards it over 8 GPUs (verified on 8xH100)",
)
def step3(ctx: LoaderContext) -> Prompt:
    images = "<im_patch>" * ctx.num_items
    return Prompt(text=_STEP3_PROMPT.format(images=images, question=ctx.question))


# Step3-VL's prompt: Step3's, without the spaces before <|BOT|>user and <|EOT|>.
_STEPVL_PROMPT = (
    "<\uff5cbegin\u2581of\u2581sentence\uff5c> You are a helpful assistant.<|BOT|>user\n "
    "{images}{question}<|EOT|><|BOT|>assistant\n<think>\n"
)


@loader(
    "stepvl",
    "image",
    repo_id="stepfun-ai/Step3-VL-10B",
    architecture="StepVLForConditionalGeneration",
    engine_args={
        "max_num_batched_tokens": 4096,
        # vLLM's example turns the vision tower's patch branch off (vision_config.enable_patch).
        "hf_overrides": {"vision_config": {"enable_patch": False}},
        "reasoning_parser": "deepseek_r1",
    },
    trust_remote_code=True,
    source=UPSTREAM,
)
def stepvl(ctx: LoaderContext) -> Prompt:
    images = "<im_patch>" * ctx.num_items
    return Prompt(text=_STEPVL_PROMPT.format(images=images, question=ctx.question))
