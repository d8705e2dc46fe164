"""Sampling settings a user names (``--sampling-arg KEY=VALUE``, a manifest line's
``sampling`` object), checked before any engine starts.

vLLM takes any value in ``SamplingParams`` and fails only at the first request, after the
engine has started (a minute on a CPU, more on a large model): an unknown key or a value of
the wrong kind is one line here instead. The keys are ``SamplingParams``' own fields; the
constraint of structured outputs (``structured_outputs``) is checked in mmrun.structured.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any

from mmrun.errors import UsageError

Check = Callable[[Any], str | None]  # None: fine; else what the value must be


def _integer(low: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "an integer"
        if low is not None and value < low:
            return f"an integer of at least {low}"
        return None

    return check


def _number(low: float | None = None, high: float | None = None, above: bool = False) -> Check:
    def check(value: Any) -> str | None:
        ok = not isinstance(value, bool) and isinstance(value, int | float)
        if ok and not math.isfinite(value):
            ok = False
        if ok and low is not None:
            ok = value > low if above else value >= low
        if ok and high is not None:
            ok = value <= high
        if ok:
            return None
        if low is not None and high is not None:
            return f"a number from {low:g}{' (excluded)' if above else ''} to {high:g}"
        if low is not None:
            return f"a number {'above' if above else 'of at least'} {low:g}"
        return "a finite number"

    return check


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _strings(value: Any) -> str | None:
    if isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(s, str) for s in value)
    ):
        return None
    return "a string or a list of strings"


def _integers(value: Any) -> str | None:
    if isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        return None
    return "a list of integers"


def _anything(value: Any) -> str | None:
    return None


# SamplingParams' fields that a user sets (vLLM 0.32), with what each value must be; the
# ones checked as "anything" are left to vLLM.
FIELDS: dict[str, Check] = {
    "n": _integer(1),
    "presence_penalty": _number(-2, 2),
    "frequency_penalty": _number(-2, 2),
    "repetition_penalty": _number(0, above=True),
    "temperature": _number(0),
    "top_p": _number(0, 1, above=True),
    "top_k": _integer(-1),
    "min_p": _number(0, 1),
    "seed": _integer(),
    "stop": _strings,
    "stop_token_ids": _integers,
    "bad_words": _strings,
    "ignore_eos": _boolean,
    "max_tokens": _integer(1),
    "min_tokens": _integer(0),
    "logprobs": _integer(-1),
    "prompt_logprobs": _integer(-1),
    "detokenize": _boolean,
    "skip_special_tokens": _boolean,
    "spaces_between_special_tokens": _boolean,
    "include_stop_str_in_output": _boolean,
    "logit_bias": _anything,
    "allowed_token_ids": _integers,
    "extra_args": _anything,
    "thinking_token_budget": _integer(0),
    "repetition_detection": _anything,
    "skip_reading_prefix_cache": _boolean,
    "structured_outputs": _anything,  # mmrun.structured checks it
}


def check_sampling(values: Mapping[str, Any], where: str) -> None:
    """Raise a UsageError naming ``where`` (``--sampling-arg``, ``m.jsonl line 3: sampling``)
    for the first key that is not a sampling field, or whose value is of the wrong kind."""
    if not values:
        return
    from mmrun.vllm_args import fields

    # The installed vLLM's own field names where its source can be read (a newer vLLM may take
    # more), else the fields above.
    installed = fields("sampling")
    known = set(installed.annotations) if installed is not None else set(FIELDS)
    for key, value in values.items():
        check = FIELDS.get(key, _anything) if key in known else None
        if check is None:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see vLLM's SamplingParams fields"
            raise UsageError(f"{where}: unknown sampling setting {key!r}", hint=hint)
        wanted = check(value)
        if wanted is not None:
            raise UsageError(
                f"{where} {key} must be {wanted}, got {value!r}",
                hint=f"e.g. {key}={_EXAMPLES.get(key, '...')}",
            )


_EXAMPLES = {
    "seed": "7",
    "max_tokens": "64",
    "temperature": "0.7",
    "top_p": "0.9",
    "top_k": "20",
    "stop": '["\\n"]',
}
