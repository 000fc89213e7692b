"""A small HTTP server around a compiled model (the example of docs/watch.md).

``seamscope run --watch --metrics-port 9464 watch_server.py -- 8000``; then
``curl 'localhost:8000/infer?n=2'`` (a batch of n rows), ``curl localhost:8000/quit`` to stop.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import torch

import seamscope


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x)).sum(dim=1)


model = torch.compile(Net(), backend="eager")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/quit":
            self._send({"bye": True})
            threading.Thread(target=self.server.shutdown).start()
            return
        n = int(parse_qs(url.query).get("n", ["1"])[0])
        # what compiles while this request runs carries its id (events, logs)
        with seamscope.watch.tag(request_id=self.headers.get("X-Request-Id", "")), torch.no_grad():
            y = model(torch.ones(n, 8))
        self._send({"rows": n, "sum": float(y.sum())})

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # quiet
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
