"""An OpenAI batch line's body fields as that prompt's own settings, as vLLM's run-batch applies
them (``ChatCompletionRequest.to_sampling_params`` and ``CompletionRequest``'s, vLLM 0.32).

- ``max_completion_tokens`` (else ``max_tokens``), ``temperature``, ``top_p``, ``top_k``,
  ``seed``, ``stop`` and vLLM's other sampling fields become the prompt's sampling settings;
  ``response_format`` (``json_schema``, ``json_object``) and vLLM's ``structured_outputs``
  its constraint (mmrun.structured), checked like ``--json-schema``.
- A field the line leaves out (or sets to null) is the run's (``--max-tokens``,
  ``--temperature``, ``--sampling-arg``), not vLLM's server default.
- ``n`` samples that many outputs (SamplingParams.n); a chat line's ``logprobs: true`` with
  ``top_logprobs: k``, and a completion line's ``logprobs: k``, ask for each token's log
  probability and k more (SamplingParams.logprobs).
- A field that changes nothing at the value given (``stream: false``, ``n: 1``,
  ``logprobs: false``, ``model``, ``user``, ...) is accepted.
- Any other field, or a value mmrun cannot honor (``prompt_logprobs``, ``tools``,
  ``stream: true``, a per-request chat template, ...), is that line's error: never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mmrun.errors import UsageError
from mmrun.sampling import check_sampling
from mmrun.structured import from_sampling_arg

CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"

# The body fields that are SamplingParams' own, under the same name.
SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "bad_words",
    "allowed_token_ids",
    "logit_bias",
    "thinking_token_budget",
    "repetition_detection",
)


def _default(*values: Any) -> Callable[[Any], bool]:
    return lambda value: value is None or any(value == v for v in values)


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


# Fields that change nothing at these values (vLLM's defaults, or what mmrun does anyway).
_NEUTRAL: dict[str, Callable[[Any], bool]] = {
    "model": lambda value: True,  # the run's --model answers every line
    "user": lambda value: True,
    "request_id": lambda value: True,
    "session_id": lambda value: True,
    "priority": _default(0),
    "cache_salt": lambda value: True,
    "stream": _default(False),
    "stream_options": _empty,
    "top_logprobs": _default(0),
    "prompt_logprobs": _default(),
    "echo": _default(False),
    "use_beam_search": _default(False),
    "length_penalty": _default(1.0),
    "watermarking": _default(False),
    "tools": _empty,
    "tool_choice": _default("none", "auto"),
    "parallel_tool_calls": lambda value: True,
    "include_reasoning": _default(True),
    "add_generation_prompt": _default(True),
    "continue_final_message": _default(False),
    "return_token_ids": _default(False),
    "return_tokens_as_token_ids": _default(False),
    "return_prompt_text": _default(False),
    "return_token_offsets": _default(False),
    "return_mm_kwargs": lambda value: True,
    "mm_payload": lambda value: True,
    "stream_interval": lambda value: True,
    "routed_experts_prompt_start": _default(0),
    "documents": _empty,
    "chat_template_kwargs": _empty,
    "mm_processor_kwargs": _empty,
    "media_io_kwargs": _empty,
    "vllm_xargs": _empty,
    "kv_transfer_params": _empty,
    "ec_transfer_params": _empty,
    "logprob_token_ids": _empty,
    "suffix": _default(""),
}
# What each endpoint's add_special_tokens defaults to (the chat template adds them for chat).
_SPECIAL_TOKENS = {CHAT_URL: False, COMPLETIONS_URL: True}
# What a line must drop or change, for the fields mmrun cannot honor at any other value.
_WHY = {
    "prompt_logprobs": "mmrun writes no log probabilities of the prompt: drop prompt_logprobs",
    "stream": "a batch is not streamed: drop stream",
    "tools": "mmrun runs no tool calls: drop tools",
    "tool_choice": "mmrun runs no tool calls: drop tool_choice",
    "use_beam_search": "mmrun does not run beam search: drop use_beam_search",
    "echo": "mmrun does not echo the prompt: drop echo",
}

_MESSAGE_FIELDS = {CHAT_URL: "messages", COMPLETIONS_URL: "prompt"}


def body_settings(body: Mapping[str, Any], url: str) -> dict[str, Any] | None:
    """The prompt's own sampling settings (its constraint under ``structured_outputs``), from
    a batch line's body: None where it sets none. Raises a UsageError naming the first field
    mmrun cannot honor."""
    settings: dict[str, Any] = {}
    for name, value in body.items():
        if name == _MESSAGE_FIELDS[url] or value is None:
            continue
        if name in SAMPLING:
            settings[name] = _logit_bias(value) if name == "logit_bias" else value
        elif name in ("max_tokens", "max_completion_tokens", "response_format", "logprobs"):
            continue
        elif name == "n":
            if value != 1:
                settings["n"] = value
        elif name == "top_logprobs" and url == CHAT_URL:
            continue
        elif name == "structured_outputs":
            settings[name] = dict(value) if isinstance(value, dict) else value
        elif not _neutral(name, value, url):
            raise UsageError(_refused(name, value))
    limit = body.get("max_completion_tokens")
    if limit is None:
        limit = body.get("max_tokens")
    if limit is not None:
        settings["max_tokens"] = limit
    asked = _logprobs(body, url)
    if asked is not None:
        settings["logprobs"] = asked
    check_sampling(settings, "body")
    constraint = _constraint(body.get("response_format"), settings.pop("structured_outputs", None))
    if constraint is not None:
        settings["structured_outputs"] = constraint
    return settings or None


def _logprobs(body: Mapping[str, Any], url: str) -> int | None:
    """SamplingParams' ``logprobs`` from a line's fields, as vLLM's requests turn them into
    it: a completion's ``logprobs`` (how many more tokens a step), a chat's ``top_logprobs``
    where its ``logprobs`` is true. None where the line asks for none."""
    value = body.get("logprobs")
    if url == COMPLETIONS_URL:
        return _count("logprobs", value)
    if value is not None and not isinstance(value, bool):
        raise UsageError(f"body logprobs={json.dumps(value)}: a chat's logprobs is true or false")
    top = _count("top_logprobs", body.get("top_logprobs"))
    if not value:
        if top:
            raise UsageError(
                f"body top_logprobs={top}: log probabilities need logprobs true",
                hint="give logprobs true, or drop top_logprobs",
            )
        return None
    return top or 0


def _count(name: str, value: Any) -> int | None:
    """A number of log probabilities: an integer from 0, or -1 (all of them), as vLLM takes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise UsageError(
            f"body {name} must be an integer of at least 0 (or -1: every token), "
            f"got {json.dumps(value)}"
        )
    return value


def _neutral(name: str, value: Any, url: str) -> bool:
    """Whether a field that is not a setting changes nothing at this value."""
    if name == "add_special_tokens":
        return bool(value == _SPECIAL_TOKENS[url])
    return _NEUTRAL.get(name, lambda v: False)(value)


def _refused(name: str, value: Any) -> str:
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    why = _WHY.get(name)
    if why is None and name in _NEUTRAL:
        why = f"mmrun honors {name} only at vLLM's default: drop it"
    if why is None:
        why = "mmrun cannot honor it: drop it (see docs/usage.md, OpenAI batch files)"
    return f"body {name}={shown}: {why}"


def _logit_bias(value: Any) -> Any:
    """OpenAI's token ids are JSON object keys (text); SamplingParams takes integers."""
    if not isinstance(value, dict):
        raise UsageError(f"body logit_bias must be an object of token id -> bias, got {value!r}")
    try:
        return {int(token): float(bias) for token, bias in value.items()}
    except (TypeError, ValueError) as exc:
        raise UsageError(f"body logit_bias must map token ids to numbers ({exc})") from exc


def _constraint(response_format: Any, structured: Any) -> dict[str, Any] | None:
    """``response_format`` over vLLM's ``structured_outputs``, as vLLM merges them, checked;
    None where neither constrains the answer."""
    kind = _response_format(response_format)
    if kind is None and structured is None:
        return None
    if structured is not None and not isinstance(structured, dict):
        raise UsageError(f"body structured_outputs must be a JSON object, got {structured!r}")
    merged = {**(structured or {}), **(kind or {})}
    where = "body response_format" if structured is None else "body structured_outputs"
    return from_sampling_arg(merged, where)


def _response_format(value: Any) -> dict[str, Any] | None:
    """The constraint a ``response_format`` names; None for none or ``{"type": "text"}``."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"json_object": True}
    if kind == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if schema is None:
            raise UsageError(
                "body response_format json_schema has no schema",
                hint='give {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}',
            )
        return {"json": schema}
    raise UsageError(
        f"body response_format type {kind!r}: mmrun takes text, json_object or json_schema"
    )
