"""What a loader receives (LoaderContext) and what it returns (Prompt).

A loader is one small function ``(LoaderContext) -> Prompt`` that builds the prompt side of a
request: the prompt text (or token ids), the stop tokens and, for models whose tokenizer
encodes the media itself, the media as it re-encoded them. What does not depend on the
question or the media (engine arguments, a chat template override, a LoRA adapter, an image
resize rule, sampling defaults) is declared as data on the loader, with :func:`mmrun.loader`.
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
class LoaderContext:
    """Everything a loader may read.

    question: the text question of the prompt.
    num_items: how many media items the prompt carries.
    model: the Hugging Face repo id, or the user's ``--model`` override (id or local path).
    templates: renders the model's chat template; only template-based loaders touch it.
    media: the decoded media of this prompt (PIL images, ``(waveform, sample_rate)``, ...);
        given only to loaders declared with ``reads_media=True`` (voxtral), empty otherwise.
    companions: how many items of other modalities the prompt carries ahead of its own, by
        modality (a clip with an image: ``{"image": 1}``); see ``companion``.
    """

    question: str
    num_items: int
    model: str
    templates: TemplateRenderer
    media: Sequence[Any] = ()
    companions: Mapping[str, int] = field(default_factory=dict)

    def companion(self, modality: str) -> int:
        """How many ``modality`` items the prompt carries ahead of its own (0: none)."""
        return self.companions.get(modality, 0)


@dataclass(frozen=True)
class Prompt:
    """A loader's answer: the prompt of one request.

    text: the rendered text prompt, or None when ``token_ids`` is given.
    token_ids: a pre-tokenized prompt (voxtral's mistral tokenizer).
    stop_token_ids: extra token ids that end generation.
    multi_modal_data: the media as the loader's own tokenizer re-encoded them, replacing the
        decoded media for ``LLM.generate`` (voxtral); None keeps the decoded media.
    """

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    stop_token_ids: tuple[int, ...] = ()
    multi_modal_data: Sequence[Any] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("a Prompt needs exactly one of text or token_ids")
