"""A model's files on the Hugging Face Hub: whether the Hub is reachable before mmrun's first
request to it (or one line at once), what to do offline, and where a LoRA adapter's files are.
Data sets from the Hub are mmrun.inputs.hub's.

huggingface_hub retries a request that fails for want of a network five times, waiting 1, 2,
4, 8 and 8 s, and loading one processor with transformers makes several such requests: without
a network, a dry run took two and a half minutes and printed some 50 retry lines before its
error. Retries are for a server that fails for a moment, not for a network that is not there.
So before the first request of a run (a processor or tokenizer to render the prompt, a LoRA
snapshot, vLLM's start), mmrun asks the Hub's host once, within ``PROBE_TIMEOUT_S`` seconds,
and stops with one line when the name does not resolve or nothing answers. Any HTTP answer,
even an error status, counts as reachable: huggingface_hub deals with those itself.

Nothing is asked with ``HF_HUB_OFFLINE`` set (everything then comes from the Hugging Face
cache) or for a model that is a local folder.

It also finds a model's LoRA adapter: in a local model folder, or in the model's snapshot,
downloaded by huggingface_hub if need be.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import socket
import threading
from functools import cache
from pathlib import Path

from mmrun.errors import DownloadError
from mmrun.request import LoraAdapter

ENDPOINT_ENV = "HF_ENDPOINT"
OFFLINE_ENV = "HF_HUB_OFFLINE"
DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true


def hub_cache_dir() -> str:
    """The Hugging Face cache as the environment names it now (huggingface_hub reads it once,
    at import): HF_HUB_CACHE, else HF_HOME/hub, else its default."""
    cache = os.environ.get("HF_HUB_CACHE")
    if cache:
        return cache
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return os.path.join(home, "hub")


def offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().upper() in _TRUE


def endpoint() -> str:
    return (os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")


def offline_hint(model: str) -> str:
    """What to do when ``model``'s files cannot be fetched, for the environment as it is."""
    if offline():
        return (
            f"{OFFLINE_ENV} is set and {model} is not in the Hugging Face cache: download it "
            f"once with network access (`hf download {model}`), or pass --model a local folder"
        )
    return (
        f"offline, set {OFFLINE_ENV}=1 to run from the Hugging Face cache, with the model "
        "downloaded there beforehand; else check the network, the proxy or HF_ENDPOINT"
    )


def check_reachable(model: str, what: str) -> None:
    """Raise one line at once if fetching ``what`` of ``model`` from the Hub cannot work."""
    if offline() or not model or Path(model).expanduser().exists():
        return
    url = endpoint()
    problem = _probe(url)
    if problem is not None:
        raise DownloadError(
            f"cannot reach the Hugging Face Hub at {url} ({problem}) to fetch {what} of {model}",
            hint=offline_hint(model),
        )


@cache
def _probe(url: str) -> str | None:
    """Why ``url`` cannot be reached, or None if it answers (asked once per process)."""
    outcome: list[str | None] = []

    def ask() -> None:
        import httpx

        try:
            with httpx.Client(timeout=PROBE_TIMEOUT_S, follow_redirects=False) as client:
                client.head(url)
        except httpx.TimeoutException:
            outcome.append(f"no answer within {PROBE_TIMEOUT_S:g} s")
        except (httpx.TransportError, httpx.InvalidURL, OSError) as exc:
            outcome.append(_why(exc))
        else:
            outcome.append(None)

    # The name lookup is not bounded by httpx's timeout: the wait for the thread is.
    thread = threading.Thread(target=ask, name="mmrun-hub-probe", daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S + 1.0)
    return outcome[0] if outcome else f"no answer within {PROBE_TIMEOUT_S:g} s"


def _why(exc: BaseException) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return "its name does not resolve"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(exc).strip()
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "its name does not resolve"
    if "Connection refused" in text:
        return "connection refused"
    return text.splitlines()[0] if text else type(exc).__name__


def lora_path(adapter: LoraAdapter | None, model: str, resolve: bool) -> str | None:
    """Where the LoRA adapter lives: inside a local model folder, or the model's Hub snapshot."""
    if adapter is None:
        return None
    if Path(model).is_dir():
        base = model
    elif resolve:
        base = snapshot(model)
    else:
        base = f"<snapshot of {model}>"
    return base if adapter.subfolder is None else os.path.join(base, adapter.subfolder)


def hub_failures() -> tuple[type[Exception], ...]:
    """What a huggingface_hub download raises when it fails: its own errors are OSErrors;
    the HTTP client's are not (httpx, or httpx2 from huggingface_hub 2 on)."""
    failures: tuple[type[Exception], ...] = (OSError, ValueError)
    for client in ("httpx", "httpx2"):
        if importlib.util.find_spec(client) is not None:
            failures += (importlib.import_module(client).HTTPError,)
    return failures


def snapshot(model: str) -> str:
    """The local snapshot of ``model`` (downloaded if need be), or one line saying why not."""
    check_reachable(model, "the LoRA adapter")
    from huggingface_hub import snapshot_download

    try:
        return str(snapshot_download(model, local_files_only=offline()))
    except hub_failures() as exc:
        first = next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__
        raise DownloadError(
            f"cannot fetch the snapshot of {model} (for its LoRA adapter): {first}",
            hint=offline_hint(model),
        ) from exc
