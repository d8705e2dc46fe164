"""Microsoft Phi vision models: Phi-3.5-vision, Phi-4-multimodal (remote code and HF format),
Phi-4-reasoning-vision (SigLIP-2 tower)."""

from __future__ import annotations

from mmrun.prompts import numbered
from mmrun.registry import UPSTREAM, loader
from mmrun.request import LoaderContext, LoraAdapter, Prompt

# Phi-4-multimodal keeps its vision and speech LoRAs inside the model repository; images
# need the vision one on every prompt.
VISION_LORA = LoraAdapter("vision", 1, subfolder="vision-lora")

_PHI4_ENGINE_ARGS = {
    "max_model_len": 4096,
    "max_num_seqs": 2,
    "enable_lora": True,
    "max_lora_rank": 320,
    # Fewer high-resolution crops per image keep several images within max_model_len.
    "mm_processor_kwargs": {"dynamic_hd": 4},
}


def _phi4_prompt(ctx: LoaderContext, placeholders: str) -> Prompt:
    return Prompt(text=f"<|user|>{placeholders}{ctx.question}<|end|><|assistant|>")


@loader(
    "phi3_v",
    "image",
    repo_id="microsoft/Phi-3.5-vision-instruct",
    architecture="Phi3VForCausalLM",
    engine_args={
        "max_model_len": 4096,
        "max_num_seqs": 2,
        # The model card advises 4 crops for several images (16 for a single one).
        "mm_processor_kwargs": {"num_crops": 4},
    },
    trust_remote_code=True,
)
def phi3_v(ctx: LoaderContext) -> Prompt:
    placeholders = numbered("<|image_{i}|>", ctx.num_items, "\n")
    return Prompt(text=f"<|user|>\n{placeholders}\n{ctx.question}<|end|>\n<|assistant|>\n")


@loader(
    "phi4_mm",
    "image",
    repo_id="microsoft/Phi-4-multimodal-instruct",
    architecture="Phi4MMForCausalLM",
    engine_args=_PHI4_ENGINE_ARGS,
    lora=VISION_LORA,
    trust_remote_code=True,
)
def phi4_mm(ctx: LoaderContext) -> Prompt:
    return _phi4_prompt(ctx, numbered("<|image_{i}|>", ctx.num_items))


# The Hugging Face-format checkpoint lives at revision "refs/pr/70" of the repository. vLLM's
# example downloads that revision and hands vLLM the local snapshot; the engine arguments carry
# no revision, so run it with `--model` pointing at that snapshot.
@loader(
    "phi4_multimodal",
    "image",
    repo_id="microsoft/Phi-4-multimodal-instruct",
    architecture="Phi4MultimodalForCausalLM",
    engine_args=_PHI4_ENGINE_ARGS,
    lora=VISION_LORA,
    note="needs the refs/pr/70 revision (pass its snapshot as --model); vLLM until v0.12.0 only",
)
def phi4_multimodal(ctx: LoaderContext) -> Prompt:
    return _phi4_prompt(ctx, "<|image|>" * ctx.num_items)


@loader(
    "phi4_siglip",
    "image",
    repo_id="microsoft/Phi-4-reasoning-vision-15B",
    architecture="Phi4ForCausalLMV",
    engine_args={"max_model_len": 8192, "max_num_seqs": 2},
    trust_remote_code=True,
    source=UPSTREAM,
)
def phi4_siglip(ctx: LoaderContext) -> Prompt:
    placeholders = "\n".join(["<image>"] * ctx.num_items)
    return Prompt(text=f"<|user|>\n{placeholders}\n{ctx.question}<|end|>\n<|assistant|>\n")
