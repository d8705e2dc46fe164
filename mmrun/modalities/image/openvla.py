"""OpenVLA (vLLM 0.34's single-image example)."""

from __future__ import annotations

from mmrun.registry import SINGLE_IMAGE, loader
from mmrun.request import LoaderContext, Prompt

# The instruction of vLLM's example, as vLLM's own chat template for OpenVLA renders it (the
# model's training prompt), without the BOS token, which the processor adds with the image.
OPENVLA_PROMPT = "In: What action should the robot take to pick up the red block?\nOut: "


@loader(
    "openvla",
    "image",
    repo_id="openvla/openvla-7b",
    architecture="OpenVLAForActionPrediction",
    engine_args={"max_model_len": 512},
    # Seven action tokens: the robot arm's deltas and its gripper.
    sampling={"temperature": 0.0, "max_tokens": 7},
    trust_remote_code=True,
    max_items=1,
    min_items=1,
    methods=("generate",),
    note="a robot policy: it answers action tokens for the example's fixed instruction, "
    "not the question",
    source=SINGLE_IMAGE,
)
def openvla(ctx: LoaderContext) -> Prompt:
    return Prompt(text=OPENVLA_PROMPT)
