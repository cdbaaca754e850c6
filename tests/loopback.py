"""Real HTTP servers for tests: bound to 127.0.0.1 on a port the OS picks, started by `with`, and
shut down and closed when it ends (the OTLP receivers, the HTML report's leak canary)."""

from __future__ import annotations

import gzip
import http.server
import threading
from typing import Callable


class LoopbackServer:
    """``answer(path, body) -> (status, content type, reply bytes)`` answers every GET and POST;
    ``requests`` keeps (method, path) of each."""

    def __init__(self, answer: Callable[[str, bytes], tuple[int, str, bytes]]):
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                outer.requests.append((method, self.path))
                status, kind, reply = answer(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_GET(self):  # noqa: N802
                self._reply("GET")

            def do_POST(self):  # noqa: N802
                self._reply("POST")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class OtlpReceiver(LoopbackServer):
    """OTLP/HTTP: /v1/metrics and /v1/logs decoded with opentelemetry-proto and kept (``metrics``,
    ``logs``; ``paths`` in order). ``status`` is what every push gets back."""

    def __init__(self, status: int = 200):
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
            ExportLogsServiceResponse,
        )
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
            ExportMetricsServiceResponse,
        )

        self.metrics: list = []
        self.logs: list = []

        def answer(path: str, body: bytes) -> tuple[int, str, bytes]:
            logs = path == "/v1/logs"
            req = ExportLogsServiceRequest() if logs else ExportMetricsServiceRequest()
            req.ParseFromString(body)
            (self.logs if logs else self.metrics).append(req)
            reply = (ExportLogsServiceResponse() if logs else ExportMetricsServiceResponse()).SerializeToString()
            return status, "application/x-protobuf", reply

        super().__init__(answer)

    @property
    def paths(self) -> list[str]:
        return [path for _, path in self.requests]
