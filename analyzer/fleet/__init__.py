"""Live and fleet use: watching growing logs, the --nl event stream, Prometheus and OTLP exports, Datasette serving."""
