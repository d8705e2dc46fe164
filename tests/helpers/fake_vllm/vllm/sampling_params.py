"""The stand-in's ``vllm.sampling_params``: SamplingParams, and StructuredOutputsParams as
vLLM's (a dataclass of the constraint's fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm import SamplingParams

__all__ = ["SamplingParams", "StructuredOutputsParams"]


@dataclass
class StructuredOutputsParams:
    json: Any = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
