"""Lines that mark where a program starts or an invocation's output begins, read only to tell one
invocation from the next in one stream (`cat *.log | capscan`, runs.boundaries): the 2026
llama-server's first line, a server's listening line, llama-bench's SQL header."""

from __future__ import annotations

from analyzer.parsers.base import Format, Pattern, Sample, rx

STARTS = Format(
    name="starts",
    description="program starts: llama-server's first line and listening line, llama-bench's SQL header",
    literals=("llama_server: initializing", "listening", "CREATE TABLE IF NOT EXISTS llama_bench"),
    patterns=(
        # the 2026 llama-server's (and `llama serve`'s) first line, under its logger's prefix
        Pattern("program.start", rx(r"\bllama_server: initializing\b"), lambda m: {"program": "llama-server"}),
        # printed once the model is loaded, before the first request: after results it is another server's
        Pattern("server.listening", rx(r"\b(?:server is listening|HTTP server listening|llama server listening at"
                                       r"|llama_server: listening on)\b")),
        # llama-bench -o sql prints its table once, before its rows
        Pattern("bench.sql_header", rx(r"^CREATE TABLE IF NOT EXISTS llama_bench \(\s*$")),
    ),
    samples=(
        Sample("0.00.002.462 I srv  llama_server: initializing ...", "program.start", {"program": "llama-server"}),
        Sample("main: server is listening on http://127.0.0.1:8080 - starting the main loop", "server.listening", {}),
        Sample("0.00.122.339 I srv  llama_server: listening on http://127.0.0.1:51619", "server.listening", {}),
        Sample("llama server listening at http://127.0.0.1:8080", "server.listening", {}),
        Sample("CREATE TABLE IF NOT EXISTS llama_bench (", "bench.sql_header", {}),
    ),
)
