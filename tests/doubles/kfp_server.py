"""A loopback stand-in for the Kubeflow Pipelines v2beta1 REST API (test double).

Answers the calls `kfp.Client.create_experiment` and `create_run` make, and keeps the
bodies it received, so a test can compare what `turbotfx submit` really sent with what
`--dry-run` printed. Only loopback; no cluster is needed.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

EXPERIMENT_ID = "experiment-1"
RUN_ID = "run-1"


class FakeKfpApi:
    def __init__(self, reject_with: int | None = None) -> None:
        self.runs: list[dict] = []
        self.experiments: list[dict] = []
        self.reject_with = reject_with  # an HTTP status to answer every run with (401, 403, ...)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path == "/apis/v2beta1/healthz":
                    self._reply(200, {"multi_user": False})
                elif url.path == "/apis/v2beta1/experiments":
                    wanted = json.dumps(parse_qs(url.query).get("filter", [""])[0])
                    found = [e for e in api.experiments if e["display_name"] in wanted]
                    self._reply(200, {"experiments": found, "total_size": len(found)})
                else:
                    self._reply(404, {"error": f"no route {url.path}"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if self.path == "/apis/v2beta1/experiments":
                    experiment = {**body, "experiment_id": EXPERIMENT_ID}
                    api.experiments.append(experiment)
                    self._reply(200, experiment)
                elif self.path == "/apis/v2beta1/runs":
                    if api.reject_with:
                        self._reply(api.reject_with, {"error": "token rejected", "code": 16})
                        return
                    api.runs.append(body)
                    self._reply(200, {**body, "run_id": RUN_ID, "state": "PENDING"})
                else:
                    self._reply(404, {"error": f"no route {self.path}"})

            def _reply(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeKfpApi:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
