"""A static file server on 127.0.0.1 that waits a fixed time before answering each request.

Run as ``python server.py FOLDER LATENCY_S``; it prints its port on the first line.
``/_stats`` answers {"requests": N} (media requests since the last ``/_reset``).
HTTP/1.1 with keep-alive, as a real media host.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time


def main() -> None:
    folder, latency = sys.argv[1], float(sys.argv[2])
    lock = threading.Lock()
    count = [0]

    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=folder, **kwargs)

        def _json(self, value: object) -> None:
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/_stats":
                with lock:
                    self._json({"requests": count[0]})
                return
            if self.path == "/_reset":
                with lock:
                    count[0] = 0
                self._json({"requests": 0})
                return
            with lock:
                count[0] += 1
            time.sleep(latency)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        # socketserver's default backlog of 5 drops some of 12 simultaneous connects, and
        # the client's TCP stack retries them only after 1 s: an artifact, not latency.
        request_queue_size = 128
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
