"""A checkpoint's ``config.json``, and the spec of a checkpoint that no mmrun key describes.

``config.json`` names the model's architectures and model type: from them mmrun finds the
key that runs a checkpoint given with ``--model`` and no ``-m`` (mmrun.planning.model_choice).
It is read from a local folder, else from the Hugging Face cache, else from the Hub (that one
file, within ``CONFIG_TIMEOUT_S`` seconds); with ``HF_HUB_OFFLINE`` set, from the cache only.

A checkpoint without a key (or run with ``-m auto``) gets a spec built here, at plan time and
never registered: it runs through ``LLM.chat`` with the model's own chat template, the
modality's chat parts, and only the engine arguments every run has (the model, the media per
prompt); vLLM infers the rest from the checkpoint.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrun.errors import DownloadError, MediaError, UsageError
from mmrun.hub_access import check_reachable, hub_failures, offline, offline_hint
from mmrun.registry import GENERIC_KEY, LoaderSpec, Modality
from mmrun.request import LoaderContext, Message, Prompt

CONFIG_FILE = "config.json"
# The most a run waits for config.json from the Hub (one small file) before it stops.
CONFIG_TIMEOUT_S = 30.0
OWN_TEMPLATE = "the checkpoint's own chat template"


@dataclass(frozen=True)
class CheckpointConfig:
    """What a checkpoint's config.json says about it: ``architectures`` (the model classes it
    names, in order), ``model_type``, and ``remote_code`` (it has an ``auto_map``: its
    classes are code from its repository)."""

    architectures: tuple[str, ...]
    model_type: str | None = None
    remote_code: bool = False

    @property
    def architecture(self) -> str:
        """The first architecture it names, or "" where it names none."""
        return self.architectures[0] if self.architectures else ""


def parse_config(data: Mapping[str, Any]) -> CheckpointConfig:
    names = data.get("architectures")
    architectures = tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()
    model_type = data.get("model_type")
    auto_map = data.get("auto_map")
    return CheckpointConfig(
        architectures,
        model_type if isinstance(model_type, str) else None,
        isinstance(auto_map, Mapping) and bool(auto_map),
    )


def read_config(model: str) -> CheckpointConfig:
    """The config.json of ``model`` (a local folder or a Hub repo id), or one line saying
    why it cannot be read."""
    local = Path(model).expanduser()
    path = _local_config(model, local) if local.exists() else _hub_config(model)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"cannot read {CONFIG_FILE} of {model}: {_first_line(exc)}",
            hint="check the checkpoint, or name its mmrun key with -m",
        ) from exc
    if not isinstance(data, dict):
        raise UsageError(
            f"{CONFIG_FILE} of {model} is not a JSON object",
            hint="check the checkpoint, or name its mmrun key with -m",
        )
    return parse_config(data)


def _local_config(model: str, folder: Path) -> Path:
    if not folder.is_dir():
        raise UsageError(
            f"--model {model} is a file, not a checkpoint folder",
            hint="pass the folder that holds the checkpoint's config.json, or a Hub repo id",
        )
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise UsageError(
            f"{model} has no {CONFIG_FILE}, which names the model's architecture",
            hint="name the model's mmrun key with -m; `mmrun models` lists them",
        )
    return path


def _hub_config(repo: str) -> Path:
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo, CONFIG_FILE)
    except ValueError as exc:  # not the shape of a repo id
        raise UsageError(
            f"--model {repo} is neither a local folder nor a Hugging Face repo id",
            hint="pass a checkpoint folder, or ORG/NAME",
        ) from exc
    if isinstance(cached, str):
        return Path(cached)
    if offline():
        raise DownloadError(
            f"{CONFIG_FILE} of {repo} is not in the Hugging Face cache", hint=offline_hint(repo)
        )
    check_reachable(repo, CONFIG_FILE)
    return _download(repo)


def _download(repo: str) -> Path:
    """config.json of ``repo`` from the Hub, within ``CONFIG_TIMEOUT_S`` seconds."""
    outcome: list[str | Exception] = []
    failures = hub_failures()

    def fetch() -> None:
        from huggingface_hub import hf_hub_download

        try:
            outcome.append(str(hf_hub_download(repo, CONFIG_FILE)))
        except failures as exc:
            outcome.append(exc)

    thread = threading.Thread(target=fetch, name="mmrun-config", daemon=True)
    thread.start()
    thread.join(CONFIG_TIMEOUT_S)
    if not outcome:
        raise DownloadError(
            f"no {CONFIG_FILE} of {repo} within {CONFIG_TIMEOUT_S:g} s", hint=offline_hint(repo)
        )
    found = outcome[0]
    if isinstance(found, Exception):
        raise DownloadError(
            f"cannot fetch {CONFIG_FILE} of {repo}: {_first_line(found)}",
            hint="check the repo id (and your access to it), or pass a local folder",
        ) from found
    return Path(found)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def own_template_messages(kind: str, question: str, count: int) -> list[Message]:
    """The conversation ``LLM.chat`` receives for one prompt (mmrun.engine.chat_input: the
    question, then the media), with each item as the placeholder part a chat template takes."""
    parts: list[dict[str, str]] = [{"type": kind} for _ in range(count)]
    return [{"role": "user", "content": [{"type": "text", "text": question}, *parts]}]


def own_template_prompt(ctx: LoaderContext, kind: str) -> Prompt:
    """The prompt as the checkpoint's own chat template renders it: its processor's, else (a
    processor without one) its tokenizer's, as vLLM looks for it. vLLM renders it again when
    it runs the chat."""
    messages = own_template_messages(kind, ctx.question, ctx.num_items)
    try:
        return Prompt(text=ctx.templates.render(messages, source="processor"))
    except MediaError:
        return Prompt(text=ctx.templates.render(messages, source="tokenizer"))


def generic_spec(
    modality: Modality, model: str, architecture: str, trust_remote_code: bool = False
) -> LoaderSpec:
    """The spec of ``model``, a checkpoint of ``architecture`` that runs with its own chat
    template (``-m auto``): chat only, no engine arguments of its own, no media limits but
    the modality's."""
    kind = modality.engine_key

    def load(ctx: LoaderContext) -> Prompt:
        return own_template_prompt(ctx, kind)

    return LoaderSpec(
        key=GENERIC_KEY,
        modality=modality.name,
        repo_id=model,
        architecture=architecture,
        load=load,
        family="checkpoint",
        methods=("chat",),
        trust_remote_code=trust_remote_code,
        note="no mmrun key: the model's own chat template, engine arguments from vLLM",
        source=OWN_TEMPLATE,
    )
