"""Log probabilities in the shapes vLLM's OpenAI server writes them (vLLM 0.32's
``_create_chat_logprobs`` and ``_create_completion_logprobs``), from the tokens' log
probabilities a completion carries (mmrun.outcome.TokenLogprob).

- A chat completion's choice: ``{"content": [{"token", "logprob", "bytes", "top_logprobs":
  [{"token", "logprob", "bytes"}, ...]}, ...]}``, ``top_logprobs`` the first ``k`` of the
  step's tokens in vLLM's order.
- A text completion's choice: ``{"text_offset", "token_logprobs", "tokens",
  "top_logprobs"}``, each step's ``top_logprobs`` an object of up to ``k + 1`` tokens (the
  sampled one and the ``k`` most likely), as OpenAI's completions define it.

A log probability below -9999 (``-inf``) is written as -9999.0, as vLLM's server writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmrun.outcome import TokenLogprob

FLOOR = -9999.0


def _bytes(token: str) -> list[int]:
    return list(token.encode("utf-8", errors="replace"))


def _value(logprob: float) -> float:
    return max(logprob, FLOOR)


def chat_logprobs(tokens: Sequence[TokenLogprob], top: int) -> dict[str, Any]:
    """A chat completion choice's ``logprobs`` (``top``: the request's ``top_logprobs``)."""
    content = []
    for step in tokens:
        entry: dict[str, Any] = {
            "token": step.token,
            "logprob": FLOOR if step.logprob is None else _value(step.logprob),
            "bytes": _bytes(step.token),
            "top_logprobs": [
                {"token": token, "logprob": _value(logprob), "bytes": _bytes(token)}
                for i, (token, logprob) in enumerate(step.top)
                if top == -1 or i < top
            ],
        }
        content.append(entry)
    return {"content": content}


def completion_logprobs(tokens: Sequence[TokenLogprob], top: int) -> dict[str, Any]:
    """A text completion choice's ``logprobs`` (``top``: the request's ``logprobs``)."""
    offsets: list[int] = []
    for i in range(len(tokens)):
        offsets.append(offsets[-1] + len(tokens[i - 1].token) if i else 0)
    return {
        "text_offset": offsets,
        "token_logprobs": [
            None if step.logprob is None else _value(step.logprob) for step in tokens
        ],
        "tokens": [step.token for step in tokens],
        "top_logprobs": [
            None
            if step.logprob is None
            else {
                token: _value(logprob)
                for i, (token, logprob) in enumerate(step.top)
                if top == -1 or top >= i
            }
            for step in tokens
        ],
    }


def shaped(tokens: Sequence[TokenLogprob] | None, top: int, text_completion: bool) -> Any:
    """The choice's ``logprobs`` for its endpoint; None where it asked for none."""
    if tokens is None:
        return None
    if text_completion:
        return completion_logprobs(tokens, top)
    return chat_logprobs(tokens, top)
