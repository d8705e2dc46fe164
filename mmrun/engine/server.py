"""vLLM's OpenAI-compatible server (``vllm serve``, ``mmrun serve``) as an engine: the same
``submit`` / ``has_output`` / ``poll`` / ``close`` as the in-process handle, each request a
``POST /v1/chat/completions`` sent by a bounded pool of sender threads. Standard library
only: a client machine needs no vLLM to reach a server.

What a request may carry and how vLLM's server reads it: docs/usage.md, "Against a vLLM
server". Failures are per request: a 4xx is that prompt's error; a 5xx or a dropped connection
is tried again (``TRIES`` in all, with back-off), then that prompt's error; a server that stops
answering at all ends the run (its unanswered prompts are not written, a rerun resumes them).
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import io
import ipaddress
import json
import os
import queue
import threading
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrun.errors import EngineError, UsageError
from mmrun.outcome import Completion, ItemError, TokenLogprob

CHAT_PATH = "/v1/chat/completions"
TRIES = 4
BACKOFF_S = 0.5
TIMEOUT_ENV = "MMRUN_SERVER_TIMEOUT"
# A template that renders the first message's text as it is: a prompt mmrun writes by hand
# (``--method generate``) reaches the model byte for byte, its media placeholders included.
VERBATIM_TEMPLATE = "{{ messages[0]['content'] }}"
MAX_SENDERS = 256
# How long ``ServerEngine.poll`` waits for a finished request: about one engine step, after
# which the in-process handle's poll returns too. Between two polls the caller sends the
# prompts whose media became ready meanwhile; a poll that waited for a result would leave the
# server only the few prompts whose media are resolved ahead (mmrun.prefetch paces them)
# until one finished, and its batch would shrink to those few.
POLL_WAIT_S = 0.05


@dataclass(frozen=True)
class ServerTarget:
    """A running vLLM server: its base URL and API key (None: the server takes none)."""

    url: str
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # the decoded JSON, or the text where it is not JSON


class Unreachable(Exception):
    """The server could not be reached or dropped the connection."""


def request_timeout() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or 600)
    except ValueError:
        raise UsageError(
            f"{TIMEOUT_ENV} must be a number of seconds",
            hint=f"unset it or set e.g. {TIMEOUT_ENV}=600",
        ) from None


class Client:
    """HTTP/1.1 with one kept-alive connection per thread."""

    def __init__(self, target: ServerTarget, timeout: float | None = None) -> None:
        parsed = urllib.parse.urlsplit(target.url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UsageError(
                f"--server {target.url!r} is not an http(s) URL",
                hint="pass the server's address, e.g. --server http://127.0.0.1:8000",
            )
        self.target = target
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        if self._prefix.endswith("/v1"):  # the OpenAI clients' base URL names /v1
            self._prefix = self._prefix[:-3]
        self.timeout = request_timeout() if timeout is None else timeout
        self._local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = kind(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Reply:
        """One request; raises Unreachable where no answer came."""
        headers = {"Accept": "application/json"}
        if self.target.api_key:
            headers["Authorization"] = f"Bearer {self.target.api_key}"
        data = None
        if body is not None:  # a JSON value, or JSON already written (request_body)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn = self._connection(self.timeout if timeout is None else timeout)
            conn.request(method, self._prefix + path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            if response.getheader("Connection", "").lower() == "close":
                self._drop()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise Unreachable(str(exc) or type(exc).__name__) from exc
        try:
            decoded: Any = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        return Reply(response.status, decoded)


def error_message(reply: Reply) -> str:
    """The server's own one-line reason, from its JSON error (vLLM's or FastAPI's shape)."""
    body = reply.body
    message: Any = body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        message = message or body.get("message") or body.get("detail") or body
    text = " ".join(str(message).split())
    return text[:300] + ("..." if len(text) > 300 else "")


# --- before any prompt -----------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """What the server serves for a run: the model name to send, and the LoRA adapter's name
    where the run's key needs one."""

    model: str
    adapter: str | None = None


def connect(
    client: Client,
    model: str,
    adapter: str | None = None,
    *,
    request_template: bool = False,
) -> Served:
    """Check the server before any prompt: it answers, takes the API key, serves ``model``
    (its name or the checkpoint it was started with) and the LoRA ``adapter`` (its name), and,
    with ``request_template``, takes a chat template per request."""
    url = client.target.url
    try:
        reply = client.call("GET", "/v1/models", timeout=30)
    except Unreachable as exc:
        raise EngineError(
            f"cannot reach the vLLM server at {url} ({exc})",
            hint="start one with `mmrun serve -m KEY`, or check --server",
        ) from None
    _check_access(reply, url)
    if reply.status != 200 or not isinstance(reply.body, Mapping):
        raise EngineError(
            f"the server at {url} did not list its models (HTTP {reply.status}: "
            f"{error_message(reply)})",
            hint="--server takes the address of vLLM's OpenAI-compatible server",
        )
    cards = [c for c in reply.body.get("data") or [] if isinstance(c, Mapping)]
    served = _served(cards, model, url)
    if adapter is not None:
        names = [c.get("id") for c in cards if c.get("parent") == served]
        if adapter not in names:
            raise EngineError(
                f"the server at {url} has no LoRA adapter {adapter!r} on {served} "
                f"(it has {', '.join(map(str, names)) or 'none'})",
                hint=f"start it with --enable-lora --lora-modules {adapter}=PATH "
                "(mmrun serve does)",
            )
    if request_template:
        _check_template(client, served)
    return Served(served, adapter)


def _check_access(reply: Reply, url: str) -> None:
    if reply.status == 401:
        raise UsageError(
            f"the vLLM server at {url} refused the API key",
            hint="pass the server's key with --api-key or VLLM_API_KEY",
        )


def _served(cards: Sequence[Mapping[str, Any]], model: str, url: str) -> str:
    bases = [c for c in cards if not c.get("parent")]
    for card in bases:
        if model in (card.get("id"), card.get("root")):
            return str(card.get("id"))
    names = ", ".join(f"{c.get('id')}" for c in bases) or "no model"
    raise EngineError(
        f"the server at {url} serves {names}, not {model}",
        hint="start a server for this key (`mmrun serve -m KEY`), or pass --model with the "
        "served name to run that model",
    )


def _check_template(client: Client, model: str) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "?"}],
        "chat_template": VERBATIM_TEMPLATE,
    }
    try:
        reply = client.call("POST", "/tokenize", body, timeout=30)
    except Unreachable as exc:
        raise EngineError(f"cannot reach the vLLM server at {client.target.url} ({exc})") from None
    if reply.status == 400 and "trust-request-chat-template" in error_message(reply):
        raise UsageError(
            f"the vLLM server at {client.target.url} takes no chat template with a request, "
            "which this run's requests carry",
            hint="start it with --trust-request-chat-template (mmrun serve does)",
        )


def server_seqs(client: Client) -> int | None:
    """The server's ``max_num_seqs``, where it tells (``VLLM_SERVER_DEV_MODE=1`` servers)."""
    try:
        reply = client.call("GET", "/server_info?config_format=json", timeout=10)
    except Unreachable:
        return None
    if reply.status != 200 or not isinstance(reply.body, Mapping):
        return None
    config = reply.body.get("vllm_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    seqs = (config or {}).get("scheduler_config", {}).get("max_num_seqs")
    return seqs if isinstance(seqs, int) and seqs > 0 else None


# --- the requests ----------------------------------------------------------------------


def picture_format(url: str) -> str:
    """How a decoded picture travels to the server at ``url``, losslessly either way (the
    server decodes the pixels mmrun's own engine would get): to a server on this host, BMP,
    which neither side compresses (a 448x448 picture: 0.24 ms to write and 0.5 ms to read,
    against 25 ms and 3.7 ms as PNG); to another host, PNG, about half the bytes of a photo."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return "BMP"
    try:
        return "BMP" if ipaddress.ip_address(host).is_loopback else "PNG"
    except ValueError:  # a host name
        return "PNG"


def _data_url(image: Any, picture: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=picture)
    return (
        b"data:image/"
        + picture.lower().encode()
        + b";base64,"
        + base64.b64encode(buffer.getvalue())
    )


def request_body(body: Mapping[str, Any], picture: str = "PNG") -> bytes:
    """A chat request as the JSON bytes sent: a decoded picture (an ``image_pil`` part)
    becomes a data URL of the lossless ``picture`` format (picture_format). Each URL goes into
    the bytes as it is, where json.dumps would scan every character of it (about 3 ms for a
    448x448 picture's 800 KB of base64, more than writing the BMP); a data URL's characters
    need no escape in JSON. Until then a marker unique to this request holds its place."""
    marker = f"mmrun-picture-{uuid.uuid4().hex}-".encode()
    urls: list[bytes] = []

    def part(value: Mapping[str, Any]) -> dict[str, Any]:
        kind = str(value.get("type", ""))
        if not kind.endswith("_pil"):
            return dict(value)
        urls.append(_data_url(value[kind], picture))
        name = kind[: -len("_pil")]
        held = f"{marker.decode()}{len(urls) - 1:06d}"
        return {"type": f"{name}_url", f"{name}_url": {"url": held}}

    messages = []
    for message in body.get("messages", ()):
        content = message.get("content")
        if isinstance(content, list):
            content = [part(p) if isinstance(p, Mapping) else p for p in content]
        messages.append({**message, "content": content})
    text = json.dumps({**body, "messages": messages}).encode()
    if not urls:
        return text
    first, *rest = text.split(marker)
    pieces = [first]
    for piece in rest:
        pieces += [urls[int(piece[:6])], piece[6:]]
    return b"".join(pieces)


def completion(body: Any) -> Completion | ItemError:
    """A chat completion's choices (the first, and the others of a request for ``n``), with
    the server's own token counts (and its prompt's cache and media counts, where it writes
    ``prompt_tokens_details``) and each choice's log probabilities where it wrote them."""
    try:
        first, *others = (_choice(choice) for choice in body["choices"])
        usage = body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        # The server counts the tokens of every choice together: the first choice's count is
        # what the others' (their log probabilities' length, where written) leave of it.
        generated = int(usage.get("completion_tokens") or 0)
        first = dataclasses.replace(
            first, completion_tokens=generated - sum(o.completion_tokens for o in others)
        )
        return dataclasses.replace(
            first,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_tokens=_count(details.get("cached_tokens")),
            created_cache_tokens=_count(details.get("created_cache_tokens")),
            multimodal_tokens=_counts(details.get("multimodal_tokens")),
            others=tuple(others),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return ItemError("engine", f"the server's answer is not a chat completion: {body!r:.200}")


def _choice(choice: Mapping[str, Any]) -> Completion:
    """One choice of a server's chat completion. A choice carries no token count of its own:
    here, its log probabilities' length where the server wrote them, else 0."""
    content = (choice.get("logprobs") or {}).get("content")
    tokens = None
    if content is not None:
        tokens = tuple(
            TokenLogprob(
                str(entry["token"]),
                float(entry["logprob"]),
                tuple((str(t["token"]), float(t["logprob"])) for t in entry["top_logprobs"]),
            )
            for entry in content
        )
    return Completion(
        text=choice["message"].get("content") or "",
        prompt_tokens=0,
        completion_tokens=len(tokens or ()),
        finish_reason=choice.get("finish_reason"),
        logprobs=tokens,
        top_logprobs=max((len(t.top) for t in tokens or ()), default=0),
    )


def _count(value: Any) -> int | None:
    return int(value) if value is not None else None


def _counts(value: Any) -> dict[str, int] | None:
    return {str(k): int(v) for k, v in value.items()} if value else None


class ServerEngine:
    """Requests in flight on a vLLM server; results in the order they finish. ``senders``
    threads send (each request's media are encoded in its sender, not in the caller's loop)."""

    def __init__(self, client: Client, served: Served, senders: int) -> None:
        self.client = client
        self.served = served
        self.in_flight = 0
        self._ids = 0
        self._todo: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self._done: queue.Queue[tuple[str, Completion | ItemError]] = queue.Queue()
        self._lost: list[EngineError] = []  # what ends the run, from the senders
        self._closed = threading.Event()
        self._picture = picture_format(client.target.url)
        self._threads = [
            threading.Thread(target=self._send_loop, name=f"mmrun-send-{i}", daemon=True)
            for i in range(max(1, min(senders, MAX_SENDERS)))
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, request: Any, params: Any, lora: Any | None, *, chat: bool, template: str | None
    ) -> str:
        """Queue one request: ``request`` the chat body's messages and template fields,
        ``params`` its sampling fields (mmrun.builder.ServerRequestBuilder)."""
        self._ids += 1
        request_id = f"s{self._ids}"
        body = {"model": self.served.adapter or self.served.model, **request, **params}
        self._todo.put((request_id, body))
        self.in_flight += 1
        return request_id

    def has_output(self) -> bool:
        return not self._done.empty()

    def poll(self) -> list[tuple[str, Completion | ItemError]]:
        """The requests finished since the last call, after waiting up to POLL_WAIT_S for the
        first (none finished: an empty list). Raises EngineError once the server stopped
        answering."""
        self._raise_if_lost()
        finished = []
        try:
            finished.append(self._done.get(timeout=POLL_WAIT_S))
        except queue.Empty:
            return finished
        while True:
            try:
                finished.append(self._done.get_nowait())
            except queue.Empty:
                break
        self.in_flight -= len(finished)
        return finished

    def _raise_if_lost(self) -> None:
        if self._lost:
            raise self._lost[0]

    def close(self) -> None:
        self._closed.set()
        for _ in self._threads:
            self._todo.put(None)

    def _send_loop(self) -> None:
        while not self._closed.is_set():
            job = self._todo.get()
            if job is None or self._closed.is_set():
                return
            request_id, body = job
            try:
                result = self.send(request_body(body, self._picture))
            except Unreachable as exc:
                self._lost.append(
                    EngineError(
                        f"the vLLM server at {self.client.target.url} stopped answering ({exc})",
                        hint="start it again and rerun the same command: it resumes",
                    )
                )
                return
            except Exception as exc:  # a part that does not encode: this prompt's error
                result = ItemError("request", f"{type(exc).__name__}: {exc}")
            self._done.put((request_id, result))

    def send(self, body: bytes) -> Completion | ItemError:
        """One chat completion, tried again on a 5xx or a dropped connection; raises
        Unreachable when the server never answered."""
        reply: Reply | None = None
        for attempt in range(TRIES):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            if self._closed.is_set():
                break
            try:
                reply = self.client.call("POST", CHAT_PATH, body)
            except Unreachable:
                if attempt == TRIES - 1:
                    raise
                continue
            if reply.status < 500:
                break
        if reply is None:
            return ItemError("engine", "stopped before the server answered")
        if reply.status == 200:
            return completion(reply.body)
        if reply.status == 404 and "model" not in error_message(reply).lower():
            self._lost.append(
                EngineError(
                    f"the vLLM server at {self.client.target.url} has no chat completions for "
                    "this model (a transcription-only model, such as Whisper)",
                    hint="run the model in mmrun's own engine: drop --server",
                )
            )
        message = f"the server answered {reply.status}: {error_message(reply)}"
        return ItemError("request" if reply.status < 500 else "engine", message)
