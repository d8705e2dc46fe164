"""What a run produces, in the two documented shapes, and the file batch results go to.

- ``mmrun.result/1``: one JSON document for a run named on the command line (``--json``).
- ``mmrun.batch/2``: one JSON line per prompt, written as soon as that prompt is finished
  (``-o FILE.jsonl``, or standard output with ``--json``).

A batch output file is appended to one complete line at a time (one ``write`` each), so a
reader never sees half a line and a process killed at any moment leaves at most one torn
last line, which the next run cuts off. Beside it, ``FILE.jsonl.mmrun.json`` records what
produced the file; a later run with the same ``-o`` resumes it (skipping the ids it already
holds) only if it would produce the same results. A line's own settings (a manifest line's
``sampling`` and constraint) are part of the prompt: a line whose settings changed since its
result was written runs again.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mmrun import __version__
from mmrun.errors import UsageError
from mmrun.inputs import Item

if TYPE_CHECKING:
    from mmrun.media import MediaItem
    from mmrun.plan import Plan
    from mmrun.request import Prompt

SCHEMA = "mmrun.result/1"
BATCH_SCHEMA = "mmrun.batch/2"
Stage = Literal["media", "request", "engine", "output"]


@dataclass(frozen=True)
class Completion:
    """One prompt's result, from vLLM's own counts; ``parsed``: the decoded answer of a prompt
    constrained to JSON (mmrun.structured), None otherwise."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    parsed: Any = None


@dataclass(frozen=True)
class ItemError:
    """Why one prompt failed: media (fetch or decode), request (the loader or vLLM refused
    it), engine (vLLM failed while generating it) or output (its answer is not what its
    constraint allows: most often cut short by max_tokens; the text is kept). ``cause``: mmrun's own error, where
    there is one (a run of named prompts raises it as it is)."""

    stage: Stage
    message: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class Outcome:
    """What became of one prompt."""

    item: Item
    question: str
    media: Sequence[MediaItem] = ()
    prompt: Prompt | None = None
    # A dry run whose prompt could not be rendered (the model's processor is not at hand): why.
    prompt_note: str | None = None
    completion: Completion | None = None
    error: ItemError | None = None
    replica: int | None = None


@dataclass
class RunResult:
    """A run named on the command line: its plan, the prompt, the media and each output."""

    plan: Plan
    question: str
    prompt: Prompt | None
    lora_path: str | None
    media: list[MediaItem] = field(default_factory=list)
    media_per_prompt: list[list[int]] = field(default_factory=list)
    outputs: list[Completion] = field(default_factory=list)
    errors: dict[int, ItemError] = field(default_factory=dict)  # by output index: stage output
    timings: dict[str, float] = field(default_factory=dict)
    # A dry run whose prompt could not be rendered (the model's processor is not at hand): why.
    prompt_note: str | None = None

    @property
    def dry_run(self) -> bool:
        return self.plan.options.dry_run


def media_json(item: MediaItem) -> dict[str, Any]:
    return {
        "source": item.source,
        "path": item.path,
        "sha256": item.sha256,
        "size_bytes": item.size_bytes,
        **item.info,
    }


def _model_json(plan: Plan) -> dict[str, Any]:
    spec = plan.spec
    return {
        "key": spec.key,
        "repo_id": spec.repo_id,
        "model": plan.model,
        "architecture": spec.architecture,
    }


def request_json(plan: Plan, prompt: Prompt | None, lora_path: str | None) -> dict[str, Any]:
    spec = plan.spec
    lora = spec.lora
    return {
        "engine_args": plan.engine_args,
        "sampling": plan.sampling,
        "stop_token_ids": list(prompt.stop_token_ids) if prompt is not None else [],
        "chat_template": spec.chat_template,
        "lora": None
        if lora is None
        else {"name": lora.name, "int_id": lora.int_id, "path": lora_path},
        "num_prompts": plan.items.total,
        "engines": plan.engines(),
        # Environment variables mmrun set for the engine (vLLM's model runner, on a GPU).
        **({"engine_env": dict(plan.engine_env)} if plan.engine_env else {}),
        # The items every prompt carries ahead of its own (an image with each clip).
        **({"with_media": plan.companion_sources()} if plan.companions else {}),
        # The modality's own settings (video: frames per clip, frame rate, pixels per frame).
        **(
            {"modality_options": plan.modality.option_values(plan.options.modality_options)}
            if plan.modality.options
            else {}
        ),
    }


def document(result: RunResult) -> dict[str, Any]:
    """The ``mmrun.result/1`` document (documented in docs/usage.md)."""
    plan, prompt = result.plan, result.prompt
    return {
        "schema": SCHEMA,
        "model": _model_json(plan),
        "modality": plan.modality.name,
        "method": plan.method,
        "dry_run": result.dry_run,
        "question": result.question,
        "prompt": prompt.text if prompt is not None else None,
        "prompt_token_ids": (
            list(prompt.token_ids) if prompt is not None and prompt.token_ids is not None else None
        ),
        **({"prompt_note": result.prompt_note} if result.prompt_note else {}),
        "request": request_json(plan, prompt, result.lora_path),
        "media": [media_json(item) for item in result.media],
        "media_per_prompt": result.media_per_prompt,
        "outputs": [
            {
                "index": i,
                "text": o.text,
                "prompt_tokens": o.prompt_tokens,
                "completion_tokens": o.completion_tokens,
                "finish_reason": o.finish_reason,
                "parsed": o.parsed,
                "error": _error_json(result.errors.get(i)),
            }
            for i, o in enumerate(result.outputs)
        ],
        "timings": {k: round(v, 4) for k, v in result.timings.items()},
        "versions": {"mmrun": __version__, "vllm": plan.vllm_version},
    }


def _error_json(error: ItemError | None) -> dict[str, Any] | None:
    return None if error is None else {"stage": error.stage, "message": error.message}


def settings_digest(item: Item) -> str | None:
    """A short digest of a prompt's own settings (a manifest line's sampling and constraint),
    recorded on its result line: a resumed run redoes a line whose settings changed."""
    if not item.sampling:
        return None
    text = json.dumps(item.sampling, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def timestamp(seconds: float) -> str:
    """A moment as UTC ISO-8601 with milliseconds: ``2026-12-02T07:14:35.123Z``."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def line(
    outcome: Outcome, dry_run: bool = False, finished_at: float | None = None
) -> dict[str, Any]:
    """One ``mmrun.batch/2`` line (documented in docs/usage.md); ``finished_at``: when the
    prompt's result came back (``time.time()``), recorded for the report's throughput chart."""
    completion, error = outcome.completion, outcome.error
    row: dict[str, Any] = {
        "id": outcome.item.id,
        "index": outcome.item.index,
        "media": list(outcome.item.media_names),
        "question": outcome.question,
        "text": completion.text if completion else None,
        "prompt_tokens": completion.prompt_tokens if completion else None,
        "completion_tokens": completion.completion_tokens if completion else None,
        "finish_reason": completion.finish_reason if completion else None,
        "parsed": completion.parsed if completion else None,
        "meta": outcome.item.meta,
        "settings": settings_digest(outcome.item),
        "error": _error_json(error),
    }
    if finished_at is not None:
        row["finished_at"] = timestamp(finished_at)
    if dry_run and outcome.prompt_note:
        row["prompt"] = None
        row["prompt_note"] = outcome.prompt_note
    if dry_run and outcome.prompt is not None:
        row["prompt"] = outcome.prompt.text
        if outcome.prompt.token_ids is not None:
            row["prompt_token_ids"] = list(outcome.prompt.token_ids)
    if outcome.replica is not None:
        row["replica"] = outcome.replica
    return row


def encode(row: Mapping[str, Any]) -> bytes:
    return (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode()


# What a later run must share with the run that wrote a file to resume it.
_IDENTITY = (
    "modality",
    "key",
    "model",
    "method",
    "question",
    "sampling",
    "seed",
    "dry_run",
    "with_media",
)


def identity(plan: Plan) -> dict[str, Any]:
    return {
        "modality": plan.modality.name,
        "key": plan.spec.key,
        "model": plan.model,
        "method": plan.method,
        "question": plan.options.question,
        "sampling": plan.sampling,
        "seed": plan.engine_args.get("seed"),
        "dry_run": plan.options.dry_run,
        "with_media": plan.companion_sources(),
    }


@dataclass
class Existing:
    """What an output file already holds: the ids done, and the ids that failed, each with
    the digest of the settings its line ran with (see settings_digest)."""

    done: dict[str, str | None] = field(default_factory=dict)
    failed: dict[str, str | None] = field(default_factory=dict)

    def holds(self, item: Item) -> bool:
        """Whether the file holds a line of this prompt, run with its present settings."""
        for ids in (self.done, self.failed):
            if item.id in ids:
                return ids[item.id] == settings_digest(item)
        return False

    def changed(self, item: Item) -> bool:
        """Whether the file holds a line of this prompt run with other settings."""
        return (item.id in self.done or item.id in self.failed) and not self.holds(item)


def _line_id(row: Mapping[str, Any]) -> str:
    """A result line's prompt id; an OpenAI batch output line (--output-format openai) is known
    by its custom_id."""
    return str(row["custom_id"] if "custom_id" in row else row.get("id"))


class OutputFile:
    """The JSONL file a batch writes, opened for appending, locked against a second writer."""

    def __init__(self, path: str, plan: Plan, *, overwrite: bool, retry_errors: bool) -> None:
        self.path = Path(path).expanduser()
        self.sidecar = self.path.with_name(self.path.name + ".mmrun.json")
        if self.path.is_dir():
            raise UsageError(f"-o {path} is a folder", hint="name a .jsonl file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise UsageError(
                f"cannot write {path}: {exc.strerror or exc}", hint="choose a writable -o path"
            ) from exc
        self.existing = Existing()
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            # A device or a pipe (`-o /dev/null`, `-o /dev/stdout`): lines stream through it,
            # with nothing to resume, so no lock and no record beside it.
            return
        self._lock()
        wanted = identity(plan)
        try:
            if overwrite:
                os.ftruncate(self._fd, 0)
            elif os.fstat(self._fd).st_size:
                self._check_identity(wanted)
                self._repair()
                self.existing = self._scan()
                if retry_errors and self.existing.failed:
                    self._drop_failed()
            self._write_sidecar(wanted)
        except BaseException:
            os.close(self._fd)  # and with it the lock
            raise

    def _lock(self) -> None:
        import fcntl

        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            raise UsageError(
                f"another mmrun is writing {self.path}",
                hint="wait for it to finish, or choose another -o",
            ) from exc

    def _check_identity(self, wanted: Mapping[str, Any]) -> None:
        try:
            recorded = json.loads(self.sidecar.read_text())["run"]
        except (OSError, ValueError, KeyError, TypeError):
            raise UsageError(
                f"{self.path} already holds results, but not what produced them "
                f"({self.sidecar.name} is missing or unreadable)",
                hint="pass --overwrite to start it again, or choose another -o",
            ) from None
        differ = [k for k in _IDENTITY if recorded.get(k) != json.loads(json.dumps(wanted[k]))]
        if differ:
            raise UsageError(
                f"{self.path} was written by a different run ({', '.join(differ)} "
                f"{'differs' if len(differ) == 1 else 'differ'})",
                hint="pass --overwrite to replace it, or choose another -o",
            )

    def _write_sidecar(self, wanted: Mapping[str, Any]) -> None:
        record = {
            "schema": BATCH_SCHEMA,
            "run": dict(wanted),
            "mmrun": __version__,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        partial = self.sidecar.with_name(f".{self.sidecar.name}.{os.getpid()}.part")
        partial.write_text(json.dumps(record, indent=2, default=str) + "\n")
        os.replace(partial, self.sidecar)

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """(offset, line) for each complete line."""
        with open(self.path, "rb") as source:
            offset = 0
            for raw in source:
                if not raw.endswith(b"\n"):
                    return
                yield offset, raw
                offset += len(raw)

    def _repair(self) -> None:
        """Cut off a torn last line (a run killed while writing it)."""
        good = 0
        for offset, raw in self._lines():
            try:
                json.loads(raw)
            except ValueError:
                break
            good = offset + len(raw)
        if good != os.fstat(self._fd).st_size:
            os.ftruncate(self._fd, good)

    def _scan(self) -> Existing:
        existing = Existing()
        for _, raw in self._lines():
            row = json.loads(raw)
            ident = _line_id(row)
            settings = row.get("settings")
            if row.get("error") is None:
                existing.done[ident] = settings
                existing.failed.pop(ident, None)
            elif ident not in existing.done:
                existing.failed[ident] = settings
        return existing

    def _drop_failed(self) -> None:
        """Rewrite the file without its error lines, so that the ids retried appear once."""
        self._rewrite(lambda row: row.get("error") is None)
        self.existing.failed.clear()

    def drop(self, ids: set[str]) -> None:
        """Rewrite the file without the lines of these ids (to be run again: their settings
        changed), so that each id appears once."""
        if not ids:
            return
        self._rewrite(lambda row: _line_id(row) not in ids)
        for ident in ids:
            self.existing.done.pop(ident, None)
            self.existing.failed.pop(ident, None)

    def _rewrite(self, keep: Callable[[dict[str, Any]], bool]) -> None:
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        with open(partial, "wb") as out:
            for _, raw in self._lines():
                if keep(json.loads(raw)):
                    out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        os.close(self._fd)
        self._fd = fd
        self._lock()

    def write(self, row: Mapping[str, Any]) -> None:
        data = encode(row)
        written = os.write(self._fd, data)
        while written < len(data):  # a regular file takes it whole; this is for safety
            written += os.write(self._fd, data[written:])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self._fd)
            os.close(self._fd)
