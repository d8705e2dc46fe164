"""OpenAI batch files (what ``vllm run-batch`` reads) as prompts, and answers in the shape it
writes.

A line is ``{"custom_id": ..., "method": "POST", "url": "/v1/chat/completions", "body":
{"model": ..., "messages": [...], "max_completion_tokens": ..., ...}}``. The messages run as
they are, through ``LLM.chat``; their media parts of the run's modality (the part types it
declares, ``Modality.openai_parts``: ``image_url``, ``input_audio``, ...) are fetched and
decoded by mmrun like any source, then put back in their place. A ``/v1/completions`` line's
``prompt`` text goes to ``LLM.generate`` as it is (vLLM's completions format carries no media).
The body's other fields are that prompt's own settings (mmrun.inputs.openai_body); one that
mmrun cannot honor is that line's error.
With ``--output-format openai`` each answer is a ``BatchRequestOutput`` line as vLLM's
run-batch writes it (vllm/entrypoints/launchers/run_batch.py), keyed by ``custom_id``: a chat
completion, or a text completion for a ``/v1/completions`` line.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmrun.errors import UsageError
from mmrun.inputs.columns import resolve_path
from mmrun.inputs.openai_body import CHAT_URL, COMPLETIONS_URL, body_settings
from mmrun.inputs.selection import Selection
from mmrun.item import Item
from mmrun.outcome import Completion
from mmrun.plugins import get_registry
from mmrun.registry import Modality
from mmrun.structured import asks_for_json


def looks_like_batch(path: Path) -> bool:
    """Whether a JSONL file's first line is an OpenAI batch request."""
    try:
        with open(path, encoding="utf-8") as lines:
            for raw in lines:
                if raw.strip():
                    row = json.loads(raw)
                    return isinstance(row, dict) and "custom_id" in row and "body" in row
    except (OSError, ValueError):
        return False
    return False


def media_parts() -> dict[str, str]:
    """A message part's type -> the registered modality whose media it carries."""
    return {kind: m.name for m in get_registry().modalities.values() for kind in m.openai_parts}


def fill_media(
    messages: Sequence[Mapping[str, Any]], modality: str, parts: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The messages with their media parts of the modality named ``modality`` replaced, in
    order, by ``parts`` (the decoded media as the model's chat parts)."""
    owners = media_parts()
    remaining = iter(parts)
    filled: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [
                next(remaining) if owners.get(str(part.get("type"))) == modality else part
                for part in content
            ]
        filled.append({**message, "content": content})
    return filled


class OpenAIBatch:
    """An OpenAI batch JSONL file."""

    chat = True

    def __init__(
        self,
        path: Path,
        modality: Modality,
        *,
        label: str,
        selection: Selection | None = None,
        base: Path | None = None,
    ) -> None:
        """``base``: the folder relative paths are relative to (None: the file's own)."""
        self.path = path
        self.base = base or path.parent
        self.modality = modality
        self.label = label
        self.selection = selection or Selection()
        self.total = 0
        self.max_count = 0
        self.asks_for_json = False  # a line's own constraint is JSON
        # The run's own modality's part types win over another's that declares them too.
        self.owners = media_parts() | dict.fromkeys(modality.openai_parts, modality.name)

    def check(self) -> None:
        seen: dict[str, int] = {}
        for item, line_no in self._read():
            if item.id in seen:
                raise UsageError(
                    f"{self.label} line {line_no}: custom_id {item.id!r} already used on line "
                    f"{seen[item.id]}",
                    hint="give each request a unique custom_id",
                )
            seen[item.id] = line_no
            self.max_count = max(self.max_count, len(item.sources))
        self.total = len(seen)
        if not self.total:
            raise UsageError(f"{self.label} holds no requests", hint="one JSON object per line")

    def __iter__(self) -> Iterator[Item]:
        for item, _ in self._read():
            yield item

    def _read(self) -> Iterator[tuple[Item, int]]:
        selection, taken, index = self.selection, 0, 0
        try:
            with open(self.path, encoding="utf-8") as lines:
                for line_no, raw in enumerate(lines, start=1):
                    if not raw.strip():
                        continue
                    if selection.keeps(index):
                        if taken == selection.limit:
                            return
                        taken += 1
                        yield self._item(raw, line_no, index), line_no
                    index += 1
        except UnicodeDecodeError as exc:
            raise UsageError(f"{self.label} is not UTF-8 text ({exc.reason})") from exc
        except OSError as exc:
            raise UsageError(f"cannot read {self.label}: {exc.strerror or exc}") from exc

    def _item(self, raw: str, line_no: int, index: int) -> Item:
        where = f"{self.label} line {line_no}"
        try:
            row = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{where} is not valid JSON ({exc})") from exc
        ident = row.get("custom_id") if isinstance(row, dict) else None
        if not isinstance(ident, str) or not ident:
            raise UsageError(
                f"{where} has no custom_id", hint="each request needs a string custom_id"
            )
        body = row.get("body")
        url = row.get("url", CHAT_URL)
        if url not in (CHAT_URL, COMPLETIONS_URL) or not isinstance(body, dict):
            return Item(
                ident,
                index,
                (),
                problem=f"request {ident} is not a chat completion or a completion with a body "
                f"(mmrun runs {CHAT_URL} and {COMPLETIONS_URL})",
            )
        try:
            sampling = body_settings(body, url)
        except UsageError as exc:
            return Item(ident, index, (), problem=f"request {ident}: {exc}")
        if sampling and asks_for_json(sampling.get("structured_outputs")):
            self.asks_for_json = True
        if url == COMPLETIONS_URL:
            return self._completion(ident, index, body, sampling)
        return self._chat(ident, index, body, sampling)

    def _completion(
        self, ident: str, index: int, body: Mapping[str, Any], sampling: dict[str, Any] | None
    ) -> Item:
        """A ``/v1/completions`` line: its prompt text, sent as it is. vLLM's completions
        format carries no media (those go in a chat completion's parts)."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            return Item(
                ident,
                index,
                (),
                problem=f"request {ident}: a completion's prompt must be one non-empty string "
                "(mmrun writes one answer per request; token ids are not read)",
            )
        return Item(ident, index, (), prompt, sampling=sampling, raw_prompt=prompt)

    def _chat(
        self, ident: str, index: int, body: Mapping[str, Any], sampling: dict[str, Any] | None
    ) -> Item:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Item(
                ident, index, (), problem=f"request {ident}: a chat completion has no messages"
            )
        sources: list[str] = []
        other: set[str] = set()
        texts: list[str] = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, list):
                if isinstance(content, str) and message.get("role") == "user":
                    texts.append(content)
                continue
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = self.owners.get(str(part.get("type")))
                if kind is None:
                    if part.get("type") == "text" and message.get("role") == "user":
                        texts.append(str(part.get("text", "")))
                    continue
                if kind != self.modality.name:
                    other.add(kind)
                    continue
                source = self.modality.openai_source(part)
                if source is None:
                    return Item(
                        ident, index, (), problem=f"request {ident}: a {kind} part names no media"
                    )
                sources.append(resolve_path(source, self.base))
        question = "\n".join(t for t in texts if t) or None
        names = tuple(
            s if not s.startswith("data:") else f"{ident} {self.modality.name} {i}"
            for i, s in enumerate(sources)
        )
        if other:
            return Item(
                ident,
                index,
                (),
                question,
                problem=f"request {ident} carries {', '.join(sorted(other))}: this run is "
                f"`mmrun {self.modality.name}`",
            )
        return Item(
            ident,
            index,
            tuple(sources),
            question,
            names=names if names != tuple(sources) else None,
            messages=tuple(messages),
            sampling=sampling,
        )


def prompt_details(completion: Completion | None, text_completion: bool) -> dict[str, Any] | None:
    """A usage's ``prompt_tokens_details`` as vLLM's server writes it (``PromptTokenUsageInfo``
    with ``--enable-prompt-tokens-details``): for a chat completion, the prompt's tokens the
    prefix cache held and wrote, and its media placeholder tokens by modality; for a text
    completion, the cached tokens alone. None where there is no count (vLLM's as well)."""
    if completion is None:
        return None
    cached = completion.cached_tokens
    if text_completion:
        created, media = None, None
    else:
        created, media = completion.created_cache_tokens, completion.multimodal_tokens or None
    if cached is None and created is None and media is None:
        return None
    return {"cached_tokens": cached, "created_cache_tokens": created, "multimodal_tokens": media}


def _choice(choice: Mapping[str, Any], text_completion: bool) -> dict[str, Any]:
    """One of a result line's choices (the line itself where it has one) as vLLM's server
    writes it: its text (or message), its log probabilities and why it ended."""
    out: dict[str, Any] = {"index": choice["index"]}
    if text_completion:
        out["text"] = choice.get("text")
    else:
        out["message"] = {"role": "assistant", "content": choice.get("text")}
    return out | {
        "logprobs": choice.get("logprobs"),
        "finish_reason": choice.get("finish_reason"),
        "stop_reason": None,
    }


def output_line(
    row: Mapping[str, Any],
    model: str,
    *,
    text_completion: bool = False,
    completion: Completion | None = None,
) -> dict[str, Any]:
    """A result line (``mmrun.batch/2``) as vLLM run-batch's ``BatchRequestOutput``: a chat
    completion, or a text completion (``text_completion``: a ``/v1/completions`` line).
    ``completion``: the engine's counts of the prompt's cache and media tokens, where it
    tells (its usage's ``prompt_tokens_details``). A line of ``n`` outputs answers with its
    ``n`` choices, its ``completion_tokens`` theirs together (as vLLM's usage counts them)."""
    error = row.get("error")
    request_id = f"vllm-batch-{uuid.uuid4().hex}"
    if error is not None:
        message = f"{error.get('stage')}: {error.get('message')}"
        return {
            "id": f"vllm-{uuid.uuid4().hex}",
            "custom_id": row["id"],
            "response": {"status_code": 400, "request_id": request_id, "body": None},
            "error": {
                "error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}
            },
        }
    prompt_tokens = row.get("prompt_tokens") or 0
    completion_tokens = row.get("completion_tokens") or 0
    body = {
        "id": f"{'cmpl' if text_completion else 'chatcmpl'}-{uuid.uuid4().hex}",
        "object": "text_completion" if text_completion else "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            _choice(c, text_completion) for c in row.get("choices") or [{**row, "index": 0}]
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": prompt_details(completion, text_completion),
            "completion_tokens_details": None,  # vLLM's: reasoning tokens, with a reasoning parser
        },
    }
    return {
        "id": f"vllm-{uuid.uuid4().hex}",
        "custom_id": row["id"],
        "response": {"status_code": 200, "request_id": request_id, "body": body},
        "error": None,
    }
