"""Rendering a model's own chat template, in one place.

The processor or tokenizer is loaded lazily, once per run, from the model id or local path,
with ``trust_remote_code`` only when the user allowed it for a model whose spec needs it.
A ``--server`` run's renderer remembers its answers across runs (RememberedRenderer).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from mmrun.cache import cache_dir
from mmrun.errors import DownloadError, MediaError, TemplateUnavailableError
from mmrun.hub_access import check_reachable, hub_cache_dir, offline, offline_hint
from mmrun.request import Message, TemplateSource


class HFTemplateRenderer:
    """A TemplateRenderer backed by transformers' AutoProcessor / AutoTokenizer."""

    def __init__(self, model: str, trust_remote_code: bool = False) -> None:
        self.model = model
        self.trust_remote_code = trust_remote_code
        # A dry run goes on without a processor it cannot load, and asks again per prompt.
        self._unavailable: dict[str, TemplateUnavailableError] = {}

    def _load(self, source: TemplateSource) -> Any:
        if source in self._unavailable:
            raise self._unavailable[source]
        try:
            return self._fetch(source)
        except TemplateUnavailableError as exc:
            self._unavailable[source] = exc
            raise

    def _fetch(self, source: TemplateSource) -> Any:
        try:
            check_reachable(self.model, f"the {source}")
        except DownloadError as exc:
            raise TemplateUnavailableError(
                exc.message, exc.hint, model=self.model, source=source
            ) from exc
        import transformers

        auto = transformers.AutoProcessor if source == "processor" else transformers.AutoTokenizer
        try:
            # local_files_only: huggingface_hub reads HF_HUB_OFFLINE only once, when it is
            # first imported; mmrun reads it now, as its Hub probe does.
            return auto.from_pretrained(
                self.model, trust_remote_code=self.trust_remote_code, local_files_only=offline()
            )
        except (OSError, ValueError) as exc:  # missing files, or a folder with no such class
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            hint = "check the model id or path"
            if not Path(self.model).expanduser().exists():
                hint += "; " + offline_hint(self.model)
            raise TemplateUnavailableError(
                f"cannot load the {source} of {self.model}: {first}",
                hint=hint,
                model=self.model,
                source=source,
            ) from exc

    @cached_property
    def processor(self) -> Any:
        return self._load("processor")

    @cached_property
    def tokenizer(self) -> Any:
        return self._load("tokenizer")

    def render(
        self,
        messages: Sequence[Message],
        *,
        source: TemplateSource,
        chat_template: str | None = None,
    ) -> str:
        owner = self.processor if source == "processor" else self.tokenizer
        try:
            prompt = owner.apply_chat_template(
                list(messages),
                tokenize=False,
                add_generation_prompt=True,
                chat_template=chat_template,
            )
        except ValueError as exc:
            raise MediaError(
                f"{self.model} has no usable chat template: {exc}",
                hint="pass a model with a chat template, or use a loader with a written prompt",
            ) from exc
        return str(prompt)

    def token_id(self, token: str) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(token))

    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)


# --- a --server run's renders, remembered ------------------------------------------------

# Files of a checkpoint folder that no template reads: left out of its fingerprint.
_WEIGHTS = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5"})
_MAX_RENDERS = 4096  # per checkpoint: the oldest go first


def checkpoint_fingerprint(model: str) -> str | None:
    """What a checkpoint's chat templates and special tokens are read from, as one string:
    a local folder's files (name, size, modification time; not its weights), or the commit
    of a Hub model's snapshot in the Hugging Face cache. None where neither is at hand."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        stats = []
        for path in sorted([*folder.iterdir(), *folder.glob("additional_chat_templates/*")]):
            if path.is_file() and path.suffix not in _WEIGHTS:
                info = path.stat()
                stats.append(f"{path.relative_to(folder)}:{info.st_size}:{info.st_mtime_ns}")
        return f"{folder.resolve()}|{'|'.join(stats)}"
    commit = _hub_commit(model)
    return f"hub:{model}@{commit}" if commit else None


def _hub_commit(model: str) -> str | None:
    if model.count("/") != 1:
        return None
    ref = (
        Path(hub_cache_dir()).expanduser() / f"models--{model.replace('/', '--')}" / "refs" / "main"
    )
    try:
        commit = ref.read_text().strip()
    except OSError:
        return None
    return commit if (ref.parent.parent / "snapshots" / commit).is_dir() else None


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


class RememberedRenderer:
    """A renderer whose answers (rendered prompts, token ids) are kept in mmrun's cache
    folder for the checkpoint they were read from, with the transformers version that
    rendered them: a later run of the same checkpoint reads them back instead of loading
    its processor or tokenizer (importing transformers and torch: seconds on a CPU), which
    is what a ``--server`` run would otherwise spend before its first request. What it
    reads back is what ``inner`` answered, byte for byte; a failure is not remembered.

    The file is append-only, one JSON line per answer (a run with a question per prompt
    appends a line per question); a line cut short by a crash is skipped, and a file that
    grew past twice ``_MAX_RENDERS`` lines is rewritten with the newest answers."""

    def __init__(self, inner: Any, model: str, trust_remote_code: bool = False) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._memo: dict[str, dict[str, Any]] = {"render": {}, "token_id": {}, "eos": {}}
        fingerprint = checkpoint_fingerprint(model)
        if fingerprint is None:
            return
        key = "\n".join(
            [
                fingerprint,
                f"transformers {_package_version('transformers')}",
                str(trust_remote_code),
            ]
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        self._path = cache_dir() / "templates" / f"{digest}.jsonl"
        self._read()

    def _read(self) -> None:
        assert self._path is not None
        try:
            lines = self._path.read_text(encoding="utf-8").splitlines()
        except (OSError, ValueError):
            return
        for line in lines:
            try:
                kind, key, value = json.loads(line)
            except (ValueError, TypeError):  # a line cut short
                continue
            if kind in self._memo and isinstance(key, str):
                self._memo[kind][key] = value
        if len(lines) > 2 * _MAX_RENDERS:
            self._compact()

    def _compact(self) -> None:
        assert self._path is not None
        for table in self._memo.values():
            while len(table) > _MAX_RENDERS:
                table.pop(next(iter(table)))
        rows = [[kind, k, v] for kind, table in self._memo.items() for k, v in table.items()]
        with contextlib.suppress(OSError):
            partial = self._path.with_name(f"{self._path.name}.{os.getpid()}.tmp")
            partial.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
            os.replace(partial, self._path)

    def render(
        self,
        messages: Sequence[Message],
        *,
        source: TemplateSource,
        chat_template: str | None = None,
    ) -> str:
        asked = [source, chat_template, list(messages)]
        key = hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()
        known = self._memo["render"].get(key)
        if isinstance(known, str):
            return known
        text = str(self.inner.render(messages, source=source, chat_template=chat_template))
        self._remember("render", key, text)
        return text

    def token_id(self, token: str) -> int:
        known = self._memo["token_id"].get(token)
        if isinstance(known, int):
            return known
        found = int(self.inner.token_id(token))
        self._remember("token_id", token, found)
        return found

    def eos_token_id(self) -> int:
        known = self._memo["eos"].get("eos")
        if isinstance(known, int):
            return known
        found = int(self.inner.eos_token_id())
        self._remember("eos", "eos", found)
        return found

    def _remember(self, kind: str, key: str, value: Any) -> None:
        with self._lock:
            table = self._memo[kind]
            table[key] = value
            while len(table) > _MAX_RENDERS:
                table.pop(next(iter(table)))
            if self._path is None:
                return
            with contextlib.suppress(OSError):  # a cache that cannot be written: not kept
                self._path.parent.mkdir(parents=True, exist_ok=True)
                # One line appended (after a line that a killed run left unfinished): runs of
                # the same checkpoint beside this one append theirs without losing these.
                line = (json.dumps([kind, key, value]) + "\n").encode()
                with self._path.open("a+b") as file:
                    end = file.seek(0, os.SEEK_END)
                    if end and os.pread(file.fileno(), 1, end - 1) != b"\n":
                        line = b"\n" + line
                    file.write(line)
