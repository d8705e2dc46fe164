"""``--question-template``: each prompt's question built from its row's fields, as benchmark
tables need (a hint, the question, and two to four options, each its own column).

The template is lines (a newline, or the two characters ``\\n`` as a shell's single quotes
keep them) of text with ``{field}`` places. A line whose fields are empty or missing in a
row is left out of that row's question: an MMBench row with no hint and two options gets
no hint line and no C and D lines.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mmrun.errors import UsageError

# A prompt's error when the template leaves it no text.
EMPTY_QUESTION = "--question-template gives no text here: each of its lines has an empty field"
# (literal text, field, format spec, conversion): a line as string.Formatter parses it.
_Part = tuple[str, str | None, str | None, str | None]


@dataclass(frozen=True)
class QuestionTemplate:
    text: str
    lines: tuple[tuple[_Part, ...], ...]

    @classmethod
    def parse(cls, text: str) -> QuestionTemplate:
        """The template, or one line (exit 2) on a brace out of place or an empty field."""
        if not text.strip():
            raise UsageError("--question-template is empty", hint="e.g. '{question}\\nA. {A}'")
        lines = []
        for line in text.replace("\\n", "\n").split("\n"):
            try:
                parts = tuple(string.Formatter().parse(line))
            except ValueError as exc:
                raise UsageError(
                    f"invalid --question-template ({exc})",
                    hint="write {COLUMN} for a field, {{ and }} for a brace",
                ) from None
            if any(field is not None and not field.strip() for _, field, _, _ in parts):
                raise UsageError(
                    "invalid --question-template: a {} names no field",
                    hint="write {COLUMN}, e.g. '{question}\\nA. {A}'",
                )
            lines.append(parts)
        return cls(text, tuple(lines))

    @property
    def fields(self) -> tuple[str, ...]:
        found = (field for line in self.lines for _, field, _, _ in line if field is not None)
        return tuple(dict.fromkeys(found))

    def check(self, available: Iterable[str], label: str, what: str = "column") -> None:
        """One line (exit 2) for a field that no row has, before the run starts."""
        have = list(available)
        missing = [f for f in self.fields if f not in have]
        if missing:
            raise UsageError(
                f"{label} has no {what} {missing[0]!r} (--question-template)",
                hint=f"its {what}s: {', '.join(have) or 'none'}",
            )

    def render(self, value: Callable[[str], Any] | Mapping[str, Any]) -> str | None:
        """The question for one row (``value``: its field's value, or a mapping of them);
        None when every line has an empty field."""
        get = value.get if isinstance(value, Mapping) else value
        kept = []
        for line in self.lines:
            out = []
            for literal, field, spec, conversion in line:
                out.append(literal)
                if field is None:
                    continue
                text = _text(get(field))
                if text is None:
                    break
                if conversion == "r":
                    text = repr(text)
                out.append(format(text, spec or ""))
            else:
                kept.append("".join(out))
        question = "\n".join(kept)
        return question if question.strip() else None


def _text(value: Any) -> str | None:
    """A field's value as text; None where it is missing or empty (an empty cell, a null, a
    NaN that pandas wrote for one)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # an option 3 that a float column holds as 3.0
    text = str(value)
    return text if text.strip() else None
