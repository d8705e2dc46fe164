"""The file batch results go to (``-o FILE.jsonl``), one ``mmrun.batch/2`` line per prompt
(mmrun.records).

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
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrun.errors import OutputError, UsageError
from mmrun.item import Item
from mmrun.records import BATCH_SCHEMA, settings_digest
from mmrun.version import __version__

if TYPE_CHECKING:
    from mmrun.plan import Plan


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
        "question": plan.question,
        "sampling": plan.sampling,
        "seed": plan.engine_args.get("seed"),
        "dry_run": plan.dry_run,
        "with_media": plan.companion_sources(),
    }


# The settings of an OpenAI batch output line (--output-format openai): vLLM's shape has no
# place for them; the line holds its prompt whatever its settings.
UNRECORDED = "-"


@dataclass
class Existing:
    """What an output file already holds: the ids done, and the ids that failed, each with
    the digest of the settings its line ran with (see settings_digest)."""

    done: dict[str, str | None] = field(default_factory=dict)
    failed: dict[str, str | None] = field(default_factory=dict)

    def holds(self, item: Item) -> bool:
        """Whether the file holds a line of this prompt, run with its present settings (or
        a line in vLLM's shape, which records none)."""
        for ids in (self.done, self.failed):
            if item.id in ids:
                return ids[item.id] in (settings_digest(item), UNRECORDED)
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
        self._record: dict[str, Any] | None = None
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
        self._record = {
            "schema": BATCH_SCHEMA,
            "run": dict(wanted),
            "mmrun": __version__,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self._replace_sidecar(self._record)

    def record_run(self, facts: Mapping[str, Any]) -> None:
        """Add what this run did (``last_run``: its counts, engine restarts) to the record
        beside the file; a record that cannot be written stays as it was."""
        if self._record is None:
            return
        with contextlib.suppress(OutputError):
            self._replace_sidecar({**self._record, "last_run": dict(facts)})

    def _replace_sidecar(self, record: Mapping[str, Any]) -> None:
        """Write the record whole or not at all (a full disk leaves the old one)."""
        partial = self.sidecar.with_name(f".{self.sidecar.name}.{os.getpid()}.part")
        try:
            partial.write_text(json.dumps(record, indent=2, default=str) + "\n")
            os.replace(partial, self.sidecar)
        except OSError as exc:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            raise OutputError(
                f"cannot write {self.sidecar}: {exc.strerror or exc}",
                hint="free space or choose another -o",
            ) from exc

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
            settings = UNRECORDED if "custom_id" in row else row.get("settings")
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
        """Append one line whole: a write that fails (a full disk, a file size limit) leaves
        the file as it was before the line and ends the run."""
        data = encode(row)
        try:
            end = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError:  # a pipe or a device: nothing to take back
            end = None
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file takes it whole; this is for safety
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            if end is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, end)
            raise OutputError(
                f"cannot write to {self.path}: {exc.strerror or exc}; the results written "
                "before are kept",
                hint="free space or choose another -o, then run the same command to resume",
            ) from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self._fd)
            os.close(self._fd)
