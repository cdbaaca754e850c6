"""The snapshot as a node_exporter textfile (``--collector.textfile.directory``).

prometheus_client renders a private ``CollectorRegistry`` (``generate_latest``);
capscan writes the file itself (analyzer.output.atomic): a temporary file under a
random name, never a symlink planted in the folder (``write_to_textfile`` opened
the guessable ``PATH.PID.THREAD``, following links), renamed over the target so
the collector never reads half a file."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from analyzer.fleet.metrics import INFO_LABELS, SPEED_LABELS, Snapshot
from analyzer.output.atomic import write_atomically

METRIC_NAMES = (
    "capscan_run_info",
    "capscan_run_timestamp_seconds",
    "capscan_throughput_tokens_per_second",
    "capscan_per_token_overhead_seconds",
    "capscan_remedy_verified",
    "capscan_last_run_timestamp_seconds",
)


def registry_of(snap: Snapshot, const: dict[str, str] | None = None) -> CollectorRegistry:
    """A private registry holding the snapshot: ``instance`` and the ``const`` labels (``--label``) on every
    series, so the textfiles of several guests in one folder stay apart."""
    const = {"instance": snap.instance, **(const or {})}
    names = tuple(const)
    reg = CollectorRegistry(auto_describe=True)

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, labels + tuple(n for n in names if n not in labels), registry=reg)

    info = gauge("capscan_run_info", "Verdict of the latest capscan run per runtime, backend and environment "
                 "(always 1).", INFO_LABELS)
    # a series' own instance (an imported run's origin) wins over the machine's
    for labels in snap.run_info:
        info.labels(**{**const, **labels}).set(1)
    when = gauge("capscan_run_timestamp_seconds", "When the latest capscan run per runtime, backend and "
                 "environment was stored (Unix time).", ("environment", "runtime", "backend"))
    for labels, value in snap.run_time:
        when.labels(**{**const, **labels}).set(value)
    speed = ("test", "model", *SPEED_LABELS, "instance")
    # the figure is a median over every configuration the run printed: the HELP says so (issue 41)
    tps = gauge("capscan_throughput_tokens_per_second", "Speed of the latest run per test (pp512, tg128, "
                "prompt, generation), model, environment, host chip and runtime: the median of the rows it "
                "printed for the test across all its configurations (threads, batch sizes), itself one printed "
                "row, not the best.", speed)
    for key, value in snap.throughput.items():
        tps.labels(**{**const, **dict(zip(speed, key, strict=True))}).set(value)
    cost = gauge("capscan_per_token_overhead_seconds", "Seconds per token a VM run pays over the bare-metal "
                 "run of the same model (1/vm - 1/host).", speed)
    for key, value in snap.overhead.items():
        cost.labels(**{**const, **dict(zip(speed, key, strict=True))}).set(value)
    if snap.remedy_verified is not None:
        g = gauge("capscan_remedy_verified", "1 if the latest capscan remedy run was verified, 0 if it failed.")
        g.labels(**const).set(snap.remedy_verified)
    if snap.last_run_timestamp is not None:
        g = gauge("capscan_last_run_timestamp_seconds", "When the newest capscan run was stored (Unix time).")
        g.labels(**const).set(snap.last_run_timestamp)
    return reg


def write_textfile(snap: Snapshot, path: str | Path, const: dict[str, str] | None = None) -> None:
    """Atomically replace ``path`` (raises OSError when its folder is missing or not writable)."""
    text = textfile_text(snap, const)
    write_atomically(str(path), lambda fh: fh.write(text), prefix=f".{Path(path).name}.", suffix=".tmp")


def textfile_text(snap: Snapshot, const: dict[str, str] | None = None) -> str:
    return generate_latest(registry_of(snap, const)).decode()
