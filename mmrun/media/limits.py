"""Limits read from the environment: a positive number, or one line that says what is wrong."""

from __future__ import annotations

import math
import os

from mmrun.errors import MediaError

# What mmrun reads of one file, downloaded or local, unless the user raises it.
DEFAULT_MAX_MB = 200


def positive_number(name: str, default: float, unit: str) -> float:
    """The value of the variable ``name``, or ``default`` when it is unset or blank."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise MediaError(
            f"{name}={raw!r} is not a positive number of {unit}",
            hint=f"set it to e.g. {default:g}, or unset it",
        )
    return value
