"""The audio modality's settings for a model and its check of each clip against them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mmrun.registry import ItemCheck, LoaderSpec


@dataclass(frozen=True)
class AudioLimits:
    """An audio model's ``media_options``.

    max_seconds: the longest clip the model takes (None: no limit); mmrun refuses longer
        clips instead of letting the model cut them silently.
    """

    max_seconds: float | None = None


def clip_length_check(spec: LoaderSpec) -> ItemCheck | None:
    """A clip no longer than the model takes, where the model has a limit."""
    options = spec.media_options
    limit = options.max_seconds if isinstance(options, AudioLimits) else None
    if limit is None:
        return None

    def check(source: str, info: Mapping[str, Any]) -> str | None:
        duration = info.get("duration_s")
        if duration is None or duration <= limit:
            return None
        return (
            f"{source} is {duration:.1f} s long; {spec.key} takes at most {limit:g} s of audio "
            f"per clip (trim it to {limit:g} s or use a long-form model)"
        )

    return check
