"""A server on 127.0.0.1:PORT that answers every GET with 404 after N seconds (/N.png)."""

import http.server
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(float(self.path.strip("/").split(".")[0]))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
