"""The Hugging Face Hub, before mmrun's first request to it: reachable, or one line at once.

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
"""

from __future__ import annotations

import os
import socket
import threading
from functools import cache
from pathlib import Path

from mmrun.errors import DownloadError

ENDPOINT_ENV = "HF_ENDPOINT"
OFFLINE_ENV = "HF_HUB_OFFLINE"
DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 5.0
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true


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


def check_cached(model: str) -> None:
    """With HF_HUB_OFFLINE set, raise one line at once if ``model`` is neither a local folder
    nor in the Hugging Face cache: vLLM's start would fail on it after seconds, with a
    traceback from each of its processes."""
    if not offline() or not model or Path(model).expanduser().exists():
        return
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # an id huggingface_hub refuses: vLLM's start says what is wrong
        return
    if not isinstance(found, str):
        raise DownloadError(f"{model} is not in the Hugging Face cache", hint=offline_hint(model))


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
