"""Media named on the command line: files, folders (every file of the modality in them) and
glob patterns."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from mmrun.errors import UsageError
from mmrun.registry import Modality


def _exists(path: Path, test: str = "exists") -> bool:
    """Path.exists / is_dir, False where the answer is not ours to know (no permission, a NUL
    byte): resolving the source later reports that in its own words."""
    try:
        return bool(getattr(path, test)())
    except (OSError, ValueError):
        return False


def is_pattern(text: str) -> bool:
    """A glob pattern, not a file: ``*`` or ``?``, or a ``[...]`` set, in a path that does not
    exist as it is written."""
    if "://" in text or text.startswith("data:") or _exists(Path(text)):
        return False
    return "*" in text or "?" in text or ("[" in text and "]" in text[text.index("[") :])


def expand_sources(texts: tuple[str, ...], modality: Modality) -> tuple[list[str], bool]:
    """Folders become every file in them with one of the modality's extensions (recursively,
    sorted) and glob patterns their matching files (sorted); other sources stay as they are.
    Also says whether anything was expanded (which makes the run a batch)."""
    found: list[str] = []
    expanded = False
    suffixes = tuple(e.lower() for e in modality.extensions)
    for text in texts:
        path = Path(text).expanduser()
        if text.strip() and _exists(path, "is_dir"):
            expanded = True
            files = sorted(
                str(p) for p in path.rglob("*") if p.is_file() and p.suffix.lower() in suffixes
            )
            if not files:
                raise UsageError(
                    f"the folder {text} holds no {modality.name} files",
                    hint=f"mmrun looks for {', '.join(modality.extensions)}",
                )
            found += files
        elif is_pattern(text):
            files = sorted(
                p for p in glob.glob(os.path.expanduser(text), recursive=True) if os.path.isfile(p)
            )
            if not files and "*" not in text and "?" not in text:
                found.append(text)  # brackets in a file name that does not exist: "no such file"
                continue
            if not files:
                raise UsageError(
                    f"no file matches {text!r}", hint="check the pattern, and quote it in the shell"
                )
            expanded = True
            found += files
        else:
            found.append(text)
    return found, expanded
