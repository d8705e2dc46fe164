"""What a loader receives (LoaderContext) and what it returns (ModelRequest).

A loader is one small function ``(LoaderContext) -> ModelRequest``. It states only what is
particular to its model: the prompt format, the model's own engine arguments, stop tokens,
a chat template override, a LoRA adapter. The parts every model shares (``model``,
``trust_remote_code``, ``limit_mm_per_prompt``, the seed, the user's overrides) are added in
one place, :func:`mmrun.plan.build_plan`, from the loader's spec and the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

TemplateSource = Literal["processor", "tokenizer"]
Message = Mapping[str, Any]


class TemplateRenderer(Protocol):
    """Renders a model's own chat template and looks up its special tokens.

    The real one (:class:`mmrun.templates.HFTemplateRenderer`) loads the model's
    processor or tokenizer with transformers; tests pass a locally built one.
    """

    def render(
        self,
        messages: Sequence[Message],
        *,
        source: TemplateSource,
        chat_template: str | None = None,
    ) -> str: ...

    def token_id(self, token: str) -> int: ...

    def eos_token_id(self) -> int: ...


@dataclass(frozen=True)
class LoraAdapter:
    """A LoRA adapter that ships inside the model's own repository.

    ``subfolder`` is the adapter's folder inside the model snapshot ("vision-lora"), or
    ``None`` when the adapter files sit at the root of the model repository itself.
    """

    name: str
    int_id: int
    subfolder: str | None = None


@dataclass(frozen=True)
class ImageResize:
    """Resize each image so both sides are multiples of ``factor`` and the area lies within
    [min_pixels, max_pixels], keeping the aspect ratio (Qwen-VL's ``smart_resize`` rule)."""

    max_pixels: int
    min_pixels: int = 56 * 56
    factor: int = 28


@dataclass(frozen=True)
class LoaderContext:
    """Everything a loader may read.

    question: the text question for this run.
    num_items: how many media items each prompt carries.
    model: the Hugging Face repo id, or the user's ``--model`` override (id or local path).
    templates: renders the model's chat template; only template-based loaders touch it.
    media: the decoded media of one prompt (PIL images, or ``(waveform, sample_rate)``);
        only loaders whose tokenizer encodes the media itself (voxtral) read it.
    """

    question: str
    num_items: int
    model: str
    templates: TemplateRenderer
    media: Sequence[Any] = ()


@dataclass(frozen=True)
class ModelRequest:
    """A loader's answer: how vLLM must be started and prompted for this model.

    engine_args: the model's own ``vllm.EngineArgs`` fields (max_model_len, max_num_seqs,
        mm_processor_kwargs, hf_overrides, ...), without model, trust_remote_code or
        limit_mm_per_prompt, which mmrun adds from the spec and the command line.
    prompt: the rendered text prompt, or None when ``prompt_token_ids`` is given.
    prompt_token_ids: a pre-tokenized prompt (voxtral's mistral tokenizer).
    stop_token_ids: extra token ids that end generation.
    chat_template: a chat template to pass to ``LLM.chat`` (models without their own).
    lora: the LoRA adapter every prompt must use.
    multi_modal_data: media as the loader's own tokenizer re-encoded them, replacing the
        decoded media for ``LLM.generate`` (voxtral); None keeps the decoded media.
    image_resize: resize images before they reach vLLM (Qwen2-VL, Qwen2.5-VL).
    """

    engine_args: Mapping[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    stop_token_ids: tuple[int, ...] = ()
    chat_template: str | None = None
    lora: LoraAdapter | None = None
    multi_modal_data: Sequence[Any] | None = None
    image_resize: ImageResize | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.prompt_token_ids is None):
            raise ValueError("a ModelRequest needs exactly one of prompt or prompt_token_ids")
