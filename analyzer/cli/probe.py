"""``probe``: run the native capability probe, store its output as a run, print the diagnosis."""

from __future__ import annotations

import io
from pathlib import Path

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import open_db, shared_options
from analyzer.cli.output import emit_report, notice
from analyzer.cli.via import via_options
from analyzer.pipeline import diagnose_and_store, store_input


@click.command("probe", context_settings={"ignore_unknown_options": True})
@click.option("--probe", "probe_path", type=click.Path(dir_okay=False), default=None,
              help="Run this probe binary instead (e.g. the Linux fake in native/interposer/build/linux/).")
@click.option("--kernels", is_flag=True,
              help="Also compile and run small Metal kernels per capability llama.cpp gates on (simdgroup reduction, "
                   "simdgroup matrix multiply, bfloat) and check the answers: proof of what the GPU computes "
                   "correctly, not of its speed. macOS only (the Linux stand-in fakes it).")
@click.argument("probe_args", nargs=-1, type=click.UNPROCESSED)
@via_options
@shared_options("db", "formats", "fail_on", "gha", "force")
def probe(opts, probe_path, kernels, probe_args) -> None:
    """Run the native capability probe, store its output as a run, print the diagnosis."""
    from analyzer.read.reader import Input, InputError
    from analyzer.remedy import platform as plat
    from analyzer.remedy.dylib import probe_binary
    from analyzer.remedy.runner import Runner

    runner = Runner(timeout=120)
    if probe_path is None:
        if plat.system() != "darwin":
            raise CapscanError(f"the Metal probe runs on macOS only (this is {plat.system()}); "
                               "pass --probe PATH to run another probe binary")
        exe, why_missing = probe_binary(runner)
        if why_missing is not None:
            raise CapscanError(f"no usable capscan-probe: {why_missing}")
    else:
        exe = Path(probe_path)
    args = [a for a in probe_args if a != "--"]
    if kernels and "--kernels" not in args:
        args.append("--kernels")
    result = runner.run([str(exe), *args])
    if result.stderr:
        click.echo(result.stderr.rstrip("\n"), err=True)
    if not result.found:
        raise CapscanError(f"{exe}: not found")
    if result.returncode != 0:
        msg = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise CapscanError(f"{exe.name} failed: {msg}")
    data = (result.stderr + result.stdout).encode()
    db = open_db(opts)
    try:
        res = store_input(db, Input("capscan-probe", io.BytesIO(data)), force=opts.force)
    except InputError as exc:
        raise CapscanError(str(exc)) from None
    notice(res)
    emit_report(opts, diagnose_and_store(db, res.run_ids, refresh_peers=True))
