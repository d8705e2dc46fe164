"""One prompt of a batch, as every reader hands it out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Item:
    """One prompt of a run: its id, its place in the input, its media sources, and the
    input's per-prompt question and meta (None: the run's question; no meta).

    names: what result lines list as the prompt's media where ``sources`` holds inline data
        (a table's bytes, a tar member) rather than a path or URL; None: the sources.
    messages: the user's own chat messages (an OpenAI batch line), whose media parts the
        decoded media replace in order; None: mmrun's one user turn.
    problem: why this prompt cannot run (a cell that holds no media source, a tar sample
        without its media); it becomes the prompt's error line instead of a request.
    sampling: an input line's own sampling settings (a manifest line's ``sampling``, an
        OpenAI batch line's body fields), checked, and its constraint under
        ``structured_outputs`` (mmrun.structured); they replace the run's. None: the run's.
    raw_prompt: the prompt text of an OpenAI ``/v1/completions`` line, sent to the engine as
        it is (no chat template, no model loader); None: the loader's prompt or the messages.
    """

    id: str
    index: int
    sources: tuple[str, ...]
    question: str | None = None
    meta: Mapping[str, Any] | None = None
    names: tuple[str, ...] | None = None
    messages: Sequence[Mapping[str, Any]] | None = None
    problem: str | None = None
    sampling: Mapping[str, Any] | None = None
    raw_prompt: str | None = None

    @property
    def media_names(self) -> tuple[str, ...]:
        return self.names if self.names is not None else self.sources
