"""Conversation records as prompts, in the layout of LLaVA-Instruct, ShareGPT4V and most
fine-tuning sets: one JSON array (or JSONL) of records such as

    {"id": "000123", "image": "000123.jpg" (or a list),
     "conversations": [{"from": "human", "value": "<image>\\nWhat is ...?"},
                       {"from": "gpt", "value": "..."}]}

(or ``"messages": [{"role": "user", "content": ...}, ...]`` and ``"images"``). A record is one
prompt: its first human turn, with its ``<image>`` markers (``<audio>``, ``<video>``: the run's
modality) taken out, asks about the record's media; the first answer after it is kept as
the prompt's ``meta.reference``, for ``mmrun score -r meta.reference``. A record of several
turns runs its first: the later questions follow answers that the model did not give, so
they are no prompts of their own; ``meta.turns`` says how many there were.

The file is read as a stream, one record at a time (a JSON array as well as JSONL), twice:
when the run is planned (ids unique, the fields named by --keep-columns and
--question-template present) and while it runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from mmrun.errors import UsageError
from mmrun.inputs.columns import resolve_path
from mmrun.inputs.selection import Selection
from mmrun.inputs.template import EMPTY_QUESTION, QuestionTemplate
from mmrun.item import Item
from mmrun.media.inline import InlineError, field_sources
from mmrun.registry import Modality

TURN_KEYS = ("conversations", "messages")
HUMAN = frozenset({"human", "user"})
ASSISTANT = frozenset({"gpt", "assistant", "model", "bot", "chatgpt"})
# Characters read at a time from a JSON array.
_CHUNK = 1 << 20


def looks_like_conversations(path: Path) -> bool:
    """Whether a .json or .jsonl file holds conversation records: a JSON array, or lines
    whose first object has a list of turns."""
    try:
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                text = raw.strip()
                if not text:
                    continue
                if text.startswith("["):
                    return True
                row = json.loads(text)
                return isinstance(row, dict) and any(
                    isinstance(row.get(k), list) for k in TURN_KEYS
                )
    except (OSError, ValueError):
        return False
    return False


class Conversations:
    """A file of conversation records, each a prompt."""

    def __init__(
        self,
        path: Path,
        modality: Modality,
        *,
        label: str,
        selection: Selection | None = None,
        keep: Sequence[str] = (),
        template: QuestionTemplate | None = None,
        base: Path | None = None,
    ) -> None:
        """``keep``: record fields copied to each result's meta; ``base``: the folder relative
        media paths are relative to (None: the file's own)."""
        self.path = path
        self.modality = modality
        self.label = label
        self.selection = selection or Selection()
        self.keep = tuple(keep)
        self.template = template
        self.base = base or path.parent
        self.total = 0
        self.max_count = 0

    def check(self) -> None:
        """Every record once: ids unique, the fields asked for present in some record."""
        seen: dict[str, str] = {}
        fields = {"id", "question", "reference"}
        for record, where, index in self._records():
            if not seen and isinstance(record, dict) and _turns_of(record) is None:
                raise UsageError(
                    f"{self.label}: {where} has no conversations or messages list",
                    hint="a JSON array is read as LLaVA-style records; a manifest is JSONL",
                )
            item = self._item(record, where, index)
            if item.id in seen:
                raise UsageError(
                    f"{self.label}: {where} has the id {item.id!r} of {seen[item.id]}",
                    hint="give each record a unique id",
                )
            seen[item.id] = where
            if isinstance(record, dict):
                fields.update(record)
            self.max_count = max(self.max_count, len(item.sources))
        self.total = len(seen)
        if not self.total:
            raise UsageError(f"{self.label} holds no records", hint="check the --input path")
        listed = sorted(fields)
        missing = [f for f in self.keep if f not in fields]
        if missing:
            raise UsageError(
                f"{self.label} has no field {missing[0]!r} (--keep-columns)",
                hint=f"its fields: {', '.join(listed)}",
            )
        if self.template is not None:
            self.template.check(listed, self.label, "field")

    def __iter__(self) -> Iterator[Item]:
        for record, where, index in self._records():
            yield self._item(record, where, index)

    def _records(self) -> Iterator[tuple[Any, str, int]]:
        """(record, where it is, its place) for the records this run takes."""
        selection, taken = self.selection, 0
        try:
            with open(self.path, encoding="utf-8") as handle:
                for index, (record, where) in enumerate(self._parse(handle)):
                    if not selection.keeps(index):
                        continue
                    if taken == selection.limit:
                        return
                    taken += 1
                    yield record, where, index
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{self.label} is not UTF-8 text ({exc.reason})", hint="save it as UTF-8"
            ) from exc
        except OSError as exc:
            raise UsageError(f"cannot read {self.label}: {exc.strerror or exc}") from exc

    def _parse(self, handle: IO[str]) -> Iterator[tuple[Any, str]]:
        stream = _Stream(handle)
        if stream.peek() != "[":
            for line_no, raw in enumerate(stream.lines(), start=1):
                if not raw.strip():
                    continue
                try:
                    yield json.loads(raw), f"line {line_no}"
                except ValueError as exc:
                    raise UsageError(
                        f"{self.label} line {line_no} is not valid JSON ({exc})",
                        hint="write a JSON array of records, or one record per line",
                    ) from None
            return
        stream.take()
        number = 0
        while True:
            if stream.peek() == "]" and number == 0:
                return
            try:
                record = stream.value()
            except ValueError as exc:
                raise UsageError(
                    f"{self.label} record {number} is not valid JSON ({exc})",
                    hint="check the file: a JSON array of records",
                ) from None
            yield record, f"record {number}"
            number += 1
            after = stream.take()
            if after == "]":
                return
            if after != ",":
                found = repr(after) if after else "the end of the file"
                raise UsageError(
                    f"{self.label}: record {number - 1} is followed by {found}, not , or ]",
                    hint="check the file: a JSON array of records",
                )

    def _item(self, record: Any, where: str, index: int) -> Item:
        name = self.modality.name
        if not isinstance(record, dict):
            return Item(str(index), index, (), problem=f"{where} is not a JSON object")
        ident = record.get("id", index)
        if isinstance(ident, bool) or not isinstance(ident, str | int) or ident == "":
            ident = index
        key = str(ident)
        meta: dict[str, Any] = {f: record.get(f) for f in self.keep}
        turns = _turns_of(record)
        if turns is None:
            return Item(
                key, index, (), problem=f"{where} has no turns (no conversations or messages list)"
            )
        questions, reference = _turns(turns)
        meta.update(reference=reference, turns=len(questions))
        if not questions:
            return Item(key, index, (), meta=meta, problem=f"{where} has no human turn")
        media: Any = record.get(name, record.get(f"{name}s"))
        media = [media] if isinstance(media, str) else media
        if media is None:
            media = []
        if not isinstance(media, list) or not all(isinstance(m, str) and m for m in media):
            return Item(
                key,
                index,
                (),
                meta=meta,
                problem=f"{where}: {name!r} must be a path or a list of paths",
            )
        marker = f"<{name}>"
        question: str | None = _without(questions[0], marker) or None
        problem = _marker_problem(questions, marker, len(media), name)
        if problem is not None:
            return Item(key, index, (), question, meta, problem=f"{where}: {problem}")
        if self.template is not None:
            scalars = {k: v for k, v in record.items() if not isinstance(v, list | dict)}
            question = self.template.render(
                {**scalars, "id": ident, "question": question, "reference": reference}
            )
            if question is None:
                return Item(key, index, (), meta=meta, problem=EMPTY_QUESTION)
        try:
            sources, names = field_sources(
                media, f"{where} {name}", lambda text: resolve_path(text.strip(), self.base)
            )
        except InlineError as exc:
            return Item(key, index, (), question, meta, problem=str(exc))
        return Item(key, index, sources, question, meta, names=names)


def _turns_of(record: Mapping[str, Any]) -> list[Any] | None:
    return next((record[k] for k in TURN_KEYS if isinstance(record.get(k), list)), None)


def _turns(turns: Sequence[Any]) -> tuple[list[str], str | None]:
    """The human turns' texts, and the first answer after the first of them."""
    questions: list[str] = []
    reference = None
    for turn in turns:
        if not isinstance(turn, Mapping):
            continue
        role = str(turn.get("from", turn.get("role", ""))).lower()
        text = _text(turn.get("value", turn.get("content")))
        if role in HUMAN:
            questions.append(text)
        elif role in ASSISTANT and questions and reference is None:
            reference = text
    return questions, reference


def _marker_problem(questions: Sequence[str], marker: str, count: int, name: str) -> str | None:
    """What is wrong with the record's markers of its media, or None: the first question
    holds one per item, or (a data set that writes none) no question holds any."""
    markers = questions[0].count(marker)
    if markers == count:
        return None
    later = next((i for i, q in enumerate(questions[1:], start=2) if marker in q), None)
    if later is not None and not markers:
        return (
            f"its {marker} marker is in human turn {later}, and mmrun runs a record's first "
            "turn only"
        )
    if markers or later is not None:
        return f"its first question has {markers} {marker} marker(s) for {count} {name}(s)"
    return None


def _text(content: Any) -> str:
    """A turn's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _without(text: str, marker: str) -> str:
    """The question with its media markers taken out, with the line breaks beside them."""
    for form in (f"{marker}\n", f"\n{marker}", marker):
        text = text.replace(form, "")
    return text.strip()


class _Stream:
    """A text file read a chunk at a time, for a JSON array's records one by one."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buffer = self.buffer[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space; "" at the end."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos].isspace():
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._more():
                return ""

    def take(self) -> str:
        found = self.peek()
        self.pos += len(found)
        return found

    def value(self) -> Any:
        """The next JSON value, read on until it is whole."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise ValueError(exc.msg) from None
            # A number or literal that reaches the chunk's end may go on in the next.
            if end == len(self.buffer) and not self.eof and self._more():
                continue
            self.pos = end
            return value

    def lines(self) -> Iterator[str]:
        """The file's lines (JSONL), from where the stream stands."""
        rest = self.buffer  # only white space was read past: line numbers stay right
        self.buffer, self.pos = "", 0
        yield from (rest + self.handle.readline()).splitlines(keepends=True)
        yield from self.handle
