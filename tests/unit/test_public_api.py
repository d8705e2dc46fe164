"""The public plugin API is ``mmrun.__all__``, and docs/writing-plugins.md lists exactly it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import mmrun

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"


def documented_names() -> list[str]:
    """The first column of the table under "## The public API"."""
    section = TUTORIAL.read_text().split("\n## The public API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)


def test_the_documented_names_are_exactly_all() -> None:
    documented = documented_names()
    assert len(documented) == len(set(documented)), "a name is listed twice"
    assert sorted(documented) == sorted(mmrun.__all__), (
        f"documented, not in __all__: {sorted(set(documented) - set(mmrun.__all__))}; "
        f"in __all__, not documented: {sorted(set(mmrun.__all__) - set(documented))}"
    )


def test_every_public_name_is_importable_from_mmrun() -> None:
    module = importlib.import_module("mmrun")
    missing = [name for name in {*mmrun.__all__, *documented_names()} if not hasattr(module, name)]
    assert missing == []
