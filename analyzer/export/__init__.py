"""Hand stored results to the stacks fleets already run.

``metrics`` reads the database into a small snapshot (no third-party
imports); ``prometheus`` writes it as a node_exporter textfile
(prometheus_client), ``otlp`` pushes it to an OpenTelemetry endpoint (the
optional ``capscan[otel]`` extra). Each is imported only by the command that
uses it, so piping a log through capscan never pays for them."""
