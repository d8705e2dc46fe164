"""A real HTTP server on 127.0.0.1 whose answers each test scripts, and helpers to look into
mmrun's download cache afterwards."""

from __future__ import annotations

import http.server
import io
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Route = Callable[[http.server.BaseHTTPRequestHandler], None]


class QuietHTTPServer(http.server.ThreadingHTTPServer):
    """A threaded test server that stays quiet when a client gives up: socketserver would
    print the reset or broken pipe's traceback on stderr, later, from the request's thread,
    into whichever test is capturing stderr then. Giving up is what these tests' clients do."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@dataclass(frozen=True)
class Hit:
    path: str
    at: float  # time.monotonic() when the request line arrived


class ScriptedServer:
    """A real HTTP server on 127.0.0.1; ``routes[path](handler)`` answers a GET,
    ``routes["POST " + path]`` a POST (its body in ``handler.body`` and, with its headers, in
    ``posts``); every request is recorded in ``hits``. ``release`` ends every stall at once (set at teardown)."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: list[Hit] = []
        self.posts: list[tuple[str, bytes, dict[str, str]]] = []
        self.release = threading.Event()
        state = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                state.hits.append(Hit(path, time.monotonic()))
                route = state.routes.get(path)
                if route is None:
                    reply(self, 404, b"not found")
                else:
                    route(self)

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                state.hits.append(Hit(path, time.monotonic()))
                length = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(length)  # type: ignore[attr-defined]
                state.posts.append((path, self.body, dict(self.headers)))  # type: ignore[attr-defined]
                route = state.routes.get(f"POST {path}")
                if route is None:
                    reply(self, 404, b"not found")
                else:
                    route(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def url(self, path: str) -> str:
        return self.base + path

    def count(self, path: str) -> int:
        return sum(1 for hit in self.hits if hit.path == path)

    def stall(self, seconds: float) -> None:
        self.release.wait(seconds)

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


def reply(
    handler: http.server.BaseHTTPRequestHandler,
    status: int = 200,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    length: int | None = None,
    chunked: bool = False,
    close: bool = False,
) -> None:
    """Send a response. ``length`` overrides Content-Length (a lie); ``chunked`` sends none;
    ``close`` closes the connection after the body, however much of it was promised."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if chunked:
        handler.send_header("Transfer-Encoding", "chunked")
    else:
        handler.send_header("Content-Length", str(len(body) if length is None else length))
    if close:
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    try:
        if chunked:
            for i in range(0, len(body), 1 << 16):
                part = body[i : i + (1 << 16)]
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            handler.wfile.write(b"0\r\n\r\n")
        else:
            handler.wfile.write(body)
        handler.wfile.flush()
    except OSError:
        pass  # the client stopped reading (size cap, timeout): that is the point


def png_bytes(width: int = 40, height: int = 30) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (0, 0, 255)).save(buffer, format="PNG")
    return buffer.getvalue()


def cache_files(cache: Path) -> list[Path]:
    """Every file under the cache folder."""
    return sorted(p for p in cache.rglob("*") if p.is_file()) if cache.exists() else []


def trusted_files(cache: Path) -> list[Path]:
    """The cached files a later run would use: not the lock files, not partial downloads."""
    return [p for p in cache_files(cache) if not p.name.startswith(".")]


def partial_files(cache: Path) -> list[Path]:
    return [p for p in cache_files(cache) if p.name.endswith(".part")]


PNG = png_bytes()
