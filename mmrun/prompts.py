"""Prompt shapes that many models share: the helpers mmrun's own loaders use, exported so a
plugin never writes ChatML or numbered placeholders by hand."""

from __future__ import annotations

from mmrun.request import LoaderContext, Message, Prompt, TemplateSource


def numbered(template: str, count: int, sep: str = "") -> str:
    """Join ``template.format(i=1..count)``: ``numbered("Image-{i}: <image>\\n", 2, "\\n")``."""
    return sep.join(template.format(i=i) for i in range(1, count + 1))


def media_first_messages(modality: str, count: int, question: str) -> list[Message]:
    """One user turn holding ``count`` media parts, then the question, for a chat template."""
    parts: list[dict[str, str]] = [{"type": modality} for _ in range(count)]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": question}]}]


def template_prompt(
    ctx: LoaderContext, modality: str, source: TemplateSource = "processor"
) -> Prompt:
    """The model's own chat template (its processor's, or its tokenizer's) over
    :func:`media_first_messages`: what vLLM's examples do for most template-based models."""
    messages = media_first_messages(modality, ctx.num_items, ctx.question)
    return Prompt(text=ctx.templates.render(messages, source=source))


def text_messages(content: str) -> list[Message]:
    """One user turn whose content is plain text (placeholders already inline)."""
    return [{"role": "user", "content": content}]


def chatml(user: str, system: str | None = None, assistant_prefix: str = "") -> str:
    """A ChatML prompt: optional system turn, one user turn, then the assistant's turn."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{assistant_prefix}"
