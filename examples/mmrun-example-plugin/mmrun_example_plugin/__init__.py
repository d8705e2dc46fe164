"""An example mmrun plugin: LLaVA-Interleave (Qwen1.5-0.5B) as the image model key ``llava-interleave``.

vLLM already runs this checkpoint (``LlavaForConditionalGeneration``, the architecture of
mmrun's own ``llava`` key); what mmrun needs from a plugin is the prompt format. It uses
only names from ``mmrun.__all__``, the public plugin API.
"""

from __future__ import annotations

from mmrun import LoaderContext, Prompt, Register, chatml, loader


@loader(
    "llava-interleave",
    "image",
    repo_id="llava-hf/llava-interleave-qwen-0.5b-hf",
    architecture="LlavaForConditionalGeneration",
    # Each image is 729 tokens (SigLIP, 384 px, patch 14); 16384 leaves room for the 12
    # default images and the answer while keeping the KV cache small.
    engine_args={"max_model_len": 16384},
    note="from the example plugin (examples/mmrun-example-plugin)",
)
def llava_interleave(ctx: LoaderContext) -> Prompt:
    # The model card's format: a ChatML user turn with every <image> first, a newline and
    # the question, then the assistant's turn, opened for the answer. (The card's own string,
    # "<|im_start|>user <image>\nWhat are these?|im_end|><|im_start|>assistant", is
    # abbreviated; the newlines are those of ChatML in Qwen1.5-Chat, the base model.)
    images = "<image>" * ctx.num_items
    return Prompt(text=chatml(f"{images}\n{ctx.question}"))


def register(register: Register) -> None:
    """The entry point mmrun calls: register this package's model key."""
    register.model(llava_interleave)
