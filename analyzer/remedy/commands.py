"""The click commands: `capscan remedy plan|run|env|host-default|undo|status`
and `capscan probe`.

Nothing here imports analyzer.cli at module level (analyzer.cli imports this
module at its end); its helpers are imported where they are used.

Exit codes: 0 done (remedy run: verified); 1 remedy run launched but the fix
was not verified; 2 usage error, or a refusal (preflight failed, or the run is
not a fixable capability-downgrade); 130 interrupted.
"""

from __future__ import annotations

import functools
import io
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

import click

from analyzer.remedy import platform as plat
from analyzer.remedy import records, transport
from analyzer.remedy.check import Check
from analyzer.remedy.runner import Runner

EXIT_UNVERIFIED = 1
EXIT_REFUSED = 2


def _common(func: Callable) -> Callable:
    @click.option("--db", "db", type=click.Path(dir_okay=False), default=None,
                  help="Database file (else $CAPSCAN_DB, else the user data dir).")
    @click.option("--json", "as_json", is_flag=True, default=False, help="Machine-readable output on stdout.")
    @click.pass_context
    @functools.wraps(func)
    def wrapper(ctx: click.Context, db, as_json, **kwargs):
        from analyzer.cli import Options

        base = ctx.obj if ctx.obj is not None else Options()
        ctx.obj = base.merged(db=db, as_json=as_json, fail_on=kwargs.pop("fail_on", None))
        return func(ctx.obj, **kwargs)

    return wrapper


def _via_options(func: Callable) -> Callable:
    func = click.option("--guest-capscan", default="capscan", show_default=True,
                        help="With --via: the capscan command in the guest.")(func)
    func = click.option("--vm", default=None, help="With --via: the VM name (ssh: the destination).")(func)
    func = click.option("--via", type=click.Choice(transport.VIAS), default=None,
                        help="Run the guest side from the host through lume ssh, tart exec, anka run or ssh.")(func)
    return func


def _open(opts):
    from analyzer.cli import _open_db

    return _open_db(opts)


def _error(msg: str):
    from analyzer.cli import CapscanError

    return CapscanError(msg)


def _dump(obj: Any) -> None:
    from analyzer.cli import _dump_json

    click.echo(_dump_json(obj))


def _refuse(opts, reason: str, *, checks: list[Check] | None = None, extra: dict | None = None) -> None:
    if opts.as_json:
        _dump({"refused": True, "reason": reason, "checks": [c.to_json() for c in checks or []], **(extra or {})})
    else:
        for c in checks or []:
            click.echo(c.line(), err=True)
        click.echo(f"capscan: refusing: {reason}", err=True)
    sys.exit(EXIT_REFUSED)


def _stock_run(db, run_id: int | None, last: bool) -> int:
    from analyzer.store.queries import last_run_id

    if run_id is not None:
        return run_id
    rid = last_run_id(db) if last else records.latest_stock_run(db)
    if rid is None:
        raise _error("no stock run stored yet: run the command once on its own and pipe it in (CMD 2>&1 | capscan)")
    return rid


def _via(opts, via: str | None, vm: str | None, guest_capscan: str, guest_args: list[str]) -> None:
    """Run `capscan <guest_args>` in the guest and exit with its status."""
    if via is None:
        return
    if not vm:
        raise _error("--via needs --vm NAME (ssh: the destination)")
    argv = [guest_capscan, *guest_args] + (["--json"] if opts.as_json and "--json" not in guest_args else [])
    try:
        wrapped = transport.wrap(via, vm, argv)
    except transport.TransportError as exc:
        raise _error(str(exc)) from None
    click.echo(f"capscan: via {via}: {shlex.join(wrapped)}", err=True)
    code = Runner().passthrough(wrapped)
    if code == 127:
        raise _error(f"{wrapped[0]} not found on this host (the {via} transport needs it)")
    sys.exit(code)


# --------------------------------------------------------------------------- group


@click.group()
def remedy() -> None:
    """Fix what the diagnosis says is fixable, prove it from the new log, refuse otherwise.

    Dry run unless --apply for anything that changes the system; `remedy run`
    changes only its child's environment.
    """


# --------------------------------------------------------------------------- plan


@remedy.command("plan")
@click.option("--run", "run_id", type=int, default=None, help="The stock run (default: newest run not made by remedy).")
@click.option("--last", is_flag=True, help="The newest stored run.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@_via_options
@_common
def plan_cmd(opts, run_id, last, command, via, vm, guest_capscan) -> None:
    """The exact steps `remedy run` would take here for a run, or why nothing should be done.

    Optionally the command to remedy after --: capscan remedy plan --run 7 -- llama-bench -m m.gguf
    """
    _via(opts, via, vm, guest_capscan, ["remedy", "plan", *(["--run", str(run_id)] if run_id else []),
                                        *(["--last"] if last else []), *(["--", *command] if command else [])])
    from analyzer.remedy.plan import build_plan

    db = _open(opts)
    rid = _stock_run(db, run_id, last)
    p = build_plan(db, rid, command=list(command) or None, runner=Runner())
    if opts.as_json:
        _dump(p)
        return
    if p["verdict"] is None:
        raise _error(p["refusal"])
    click.echo(f"run {rid}: {p['verdict']}" + ("  (fixable)" if p.get("fixable") else ""))
    if not p["actionable"]:
        click.echo(f"nothing to do: {p['refusal']}")
        return
    for i, s in enumerate(p["steps"], 1):
        click.echo(f"{i}. {s['title']}\n   $ {s['shell']}\n   check: {s['check']}")
    for n in p.get("notes", []):
        click.echo(f"note: {n}")


# --------------------------------------------------------------------------- run


def preflight(db, *, cmd: list[str] | None, family_spec: str, diag: dict[str, Any], stock_shim: dict | None,
              dylib_path: str | None, runner: Runner, record_checksum: bool = True):
    """All checks for launching cmd (or, with cmd None, for printing env prefixes)."""
    from analyzer.remedy import preflight as pf

    return pf.gather(db, cmd=cmd, family_spec=family_spec, diag=diag, stock_shim=stock_shim, dylib_path=dylib_path,
                     runner=runner, record_checksum=record_checksum)


def _flag(v: Any) -> str:
    return "-" if v is None else ("yes" if v is True else "no" if v is False else str(v))


def _print_compare(cmp: dict[str, Any], out) -> None:
    from analyzer.rules.chips import family_name

    b, a = cmp["before"], cmp["after"] or {}
    rows = [("family", f"{family_name(b['apple_family'])} ({b['apple_family']})",
             f"{family_name(a.get('apple_family'))} ({a.get('apple_family')})")]
    for k, label in (("simdgroup_reduction", "simdgroup reduction"), ("simdgroup_mm", "simdgroup matrix mul."),
                     ("bfloat", "bfloat")):
        rows.append((label, _flag(b[k]), _flag(a.get(k))))
    rows.append(("verdict", str(b["verdict"]), str(a.get("verdict"))))
    for test, s in cmp["throughput"].items():
        rows.append((test, f"{s['before']:,.2f} t/s", f"{s['after']:,.2f} t/s   {s['ratio']:.2f}x"))
    print(f"{'':25}{'before (run ' + str(cmp['stock_run_id']) + ')':<24}after (run {cmp['new_run_id']})", file=out)
    for label, x, y in rows:
        print(f"  {label:<23}{x:<24}{y}", file=out)
    if cmp["throughput"]:
        print("speedup: " + ", ".join(f"{t} {s['ratio']:.2f}x" for t, s in cmp["throughput"].items()), file=out)


@remedy.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--family", "family_spec", default="auto", show_default=True,
              help="The Apple family cap: auto (the host chip's true family) or a code such as 1007.")
@click.option("--run", "run_id", type=int, default=None, help="The stock run to compare with and link to.")
@click.option("--last", is_flag=True, help="Use the newest stored run as the stock run.")
@click.option("--dylib", "dylib_path", type=click.Path(dir_okay=False), default=None,
              help="Inject this library instead of the one built from native/interposer/.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_via_options
@_common
def run_cmd(opts, family_spec, run_id, last, dylib_path, command, via, vm, guest_capscan) -> None:
    """Launch CMD with the interposer injected, store and verify the new run.

    capscan remedy run [--family auto|N] -- CMD ARGS...
    """
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise _error("nothing to run: capscan remedy run -- CMD ARGS...")
    _via(opts, via, vm, guest_capscan, ["remedy", "run", "--family", family_spec,
                                        *(["--run", str(run_id)] if run_id else []), *(["--last"] if last else []),
                                        "--", *cmd])
    from analyzer.diagnose import diagnose_runs
    from analyzer.remedy import launch as L
    from analyzer.remedy.plan import refusal_for

    db = _open(opts)
    stock_id = _stock_run(db, run_id, last)
    stock = next(iter(diagnose_runs(db, [stock_id])), None)
    if stock is None:
        raise _error(f"no run {stock_id}")
    diag = stock.diagnosis or {}
    refusal = refusal_for(stock, diag)
    if refusal:
        _refuse(opts, f"run {stock_id} is {diag.get('verdict')}: {refusal}",
                extra={"stock_run_id": stock_id, "verdict": diag.get("verdict")})
    runner = Runner()
    shim = stock.facts.shim.model_dump() if stock.facts.shim else None
    checks, inj, family, lib = preflight(db, cmd=cmd, family_spec=family_spec, diag=diag, stock_shim=shim,
                                         dylib_path=dylib_path, runner=runner)
    bad = [c for c in checks if c.failed]
    if bad or inj is None or family is None or lib is None or lib.choice is None:
        _refuse(opts, f"{len(bad)} preflight check(s) failed; nothing was launched", checks=checks,
                extra={"stock_run_id": stock_id})
    if not opts.as_json:
        click.echo(f"capscan: stock run {stock_id} ({diag.get('verdict')}); preflight:", err=True)
        for c in checks:
            click.echo(c.line(), err=True)
    library = str(lib.choice.path)
    click.echo(f"capscan: launching with {inj.env_var}={library} {plat.FAMILY_VAR}={family}: {shlex.join(cmd)}",
               err=True)
    action_id = L.record_run(db, cmd=cmd, family=family, library=library, sha256=lib.sha256, inj=inj,
                             stock_run_id=stock_id)
    env = L.child_env(runner.env, inj, library, family)
    out_sink = sys.stderr.buffer if opts.as_json else sys.stdout.buffer
    sys.stdout.flush()
    sys.stderr.flush()
    outcome = L.launch(db, cmd, env, out=out_sink, err=sys.stderr.buffer)
    if outcome.run_ids:
        records.link_runs(db, outcome.run_ids, stock_id, L.RELATION, action_id)
    new_runs = diagnose_runs(db, outcome.run_ids)
    outcome.checks = L.verify(outcome, new_runs, family, inj)
    main = L._main_run(new_runs)
    cmp = L.compare(stock, main) if main is not None else None
    failed_checks = [c for c in outcome.checks if c.failed]
    result = "verified" if outcome.verified else "failed: " + ", ".join(c.name for c in failed_checks)
    rec = records.get(db, action_id)
    args = {**(rec["args"] if rec else {}), "run_ids": outcome.run_ids, "returncode": outcome.returncode}
    records.set_result(db, action_id, result, args)
    if opts.as_json:
        _dump({"refused": False, "stock_run_id": stock_id, "run_ids": outcome.run_ids, "family": family,
               "injection": {"env_var": inj.env_var, "library": library, "sha256": lib.sha256},
               "preflight": [c.to_json() for c in checks], "verification": [c.to_json() for c in outcome.checks],
               "verified": outcome.verified, "compare": cmp, "returncode": outcome.returncode,
               "action_id": action_id})
    else:
        out = sys.stdout
        print("", file=out)
        print(f"remedy run: stock run {stock_id} -> new run(s) {', '.join(map(str, outcome.run_ids)) or 'none'} "
              f"(family {family}, {inj.env_var})", file=out)
        if cmp:
            _print_compare(cmp, out)
        print("verification:", file=out)
        for c in outcome.checks:
            print(c.line(), file=out)
        if outcome.verified:
            print("verified: the interposer loaded and llama.cpp's capability flags are now true.", file=out)
        else:
            print(f"NOT verified: {failed_checks[0].name} failed: {failed_checks[0].reason}.", file=out)
    if not outcome.verified:
        sys.exit(EXIT_UNVERIFIED)


# --------------------------------------------------------------------------- env


@remedy.command("env", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--shell", type=click.Choice(["sh", "zsh", "fish"]), default="sh", show_default=True,
              help="Quote for this shell (bash: sh).")
@click.option("--family", "family_spec", default="auto", show_default=True)
@click.option("--run", "run_id", type=int, default=None, help="The stock run whose diagnosis applies.")
@click.option("--last", is_flag=True)
@click.option("--dylib", "dylib_path", type=click.Path(dir_okay=False), default=None)
@click.option("--scrub-children", is_flag=True,
              help="Also set CAPSCAN_INTERPOSER_SCRUB=1: programs the command starts do not inherit the library.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@_via_options
@_common
def env_cmd(opts, shell, family_spec, run_id, last, dylib_path, scrub_children, command, via, vm,
            guest_capscan) -> None:
    """The prefix for launching one command yourself: /usr/bin/env DYLD_INSERT_LIBRARIES=... CMD.

    capscan remedy env [-- CMD ARGS...]: with CMD, the whole line (after checking
    every binary CMD's launch runs through); without, the prefix to put in front
    of it. Never an `export`: the variables reach that one command only.
    """
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    _via(opts, via, vm, guest_capscan, ["remedy", "env", "--shell", shell, "--family", family_spec,
                                        *(["--run", str(run_id)] if run_id else []), *(["--last"] if last else []),
                                        *(["--scrub-children"] if scrub_children else []),
                                        *(["--", *cmd] if cmd else [])])
    from analyzer.diagnose import diagnose_runs
    from analyzer.remedy import prefix as px
    from analyzer.remedy.plan import refusal_for

    db = _open(opts)
    diag: dict[str, Any] = {}
    shim = None
    rid = run_id if run_id is not None else (_stock_run(db, None, True) if last else records.latest_stock_run(db))
    if rid is not None:
        stock = next(iter(diagnose_runs(db, [rid])), None)
        if stock is None:
            raise _error(f"no run {rid}")
        diag = stock.diagnosis or {}
        refusal = refusal_for(stock, diag)
        if refusal:
            _refuse(opts, f"run {rid} is {diag.get('verdict')}: {refusal}")
        shim = stock.facts.shim.model_dump() if stock.facts.shim else None
    runner = Runner()
    checks, inj, family, lib = preflight(db, cmd=cmd or None, family_spec=family_spec, diag=diag, stock_shim=shim,
                                         dylib_path=dylib_path, runner=runner)
    if any(c.failed for c in checks) or family is None or lib is None or lib.choice is None or inj is None:
        _refuse(opts, "preflight failed; nothing printed", checks=checks)
    prefix = px.prefix_argv(inj, str(lib.choice.path), family, scrub_children=scrub_children)
    line = px.quote(shell, prefix + cmd)
    if opts.as_json:
        _dump({"shell": shell, "env": dict(a.split("=", 1) for a in prefix[1:]), "prefix": prefix,
               "command": cmd or None, "line": line, "run_id": rid, "checks": [c.to_json() for c in checks]})
        return
    for c in checks:
        click.echo(c.line(), err=True)
    if rid is None:
        click.echo("capscan: no stored run: nothing confirms this machine is a fixable guest; you vouch for it.",
                   err=True)
    click.echo(line)
    if not cmd:
        click.echo(f"capscan: put the line above in front of the one command to remedy (e.g. ... llama-bench -m "
                   f"model.gguf); {inj.env_var} then reaches that command and what it starts, never your shell. "
                   "`capscan remedy env -- CMD ARGS` also checks every binary CMD runs through.", err=True)


# --------------------------------------------------------------------------- host default


def _on_host(runner: Runner) -> str | None:
    """None when this is a macOS host; else why not."""
    if plat.system() != "darwin":
        return (f"the ParavirtualizedGraphics default exists only on the macOS host that runs the VMs, and this is "
                f"{plat.system()}")
    guest, how = plat.is_guest(runner)
    if guest:
        return (f"this is a guest ({how}); the default is read by the host's ParavirtualizedGraphics, so set it "
                "on the host")
    return None


@remedy.command("host-default")
@click.option("--status", "mode", flag_value="status", default=True, help="Show the current value (default).")
@click.option("--apply", "apply_", is_flag=True, help="Set it (records the value it replaces); with --undo: do it.")
@click.option("--undo", "undo_", is_flag=True, help="Put back the value capscan replaced (dry run without --apply).")
@_common
def host_default_cmd(opts, mode, apply_, undo_) -> None:
    """The host's com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel."""
    from analyzer.remedy import hostdefault as hd

    runner = Runner()
    db = _open(opts)
    why_not = _on_host(runner)
    if why_not and (apply_ or undo_):
        raise _error(f"not changing it: {why_not}")
    current = hd.read(runner) if not why_not else None
    mine = [a for a in records.actions(db, hd.ACTION)]
    pending = [a for a in records.undoable(db) if a["action"] == hd.ACTION]
    doc: dict[str, Any] = {"domain": hd.DOMAIN, "key": hd.KEY, "host": why_not is None, "why_not_host": why_not,
                           "current": current.to_json() if current else None, "records": mine,
                           "restart": hd.RESTART, "note": hd.SUFFICIENT}
    if undo_:
        if not pending:
            doc["undo"] = {"done": False, "message": "capscan has not changed this default (nothing recorded)."}
        else:
            a = pending[0]
            if apply_:
                ok, msg = hd.undo_action(runner, db, a)
                doc["undo"] = {"done": ok, "message": msg, "action_id": a["id"]}
            else:
                doc["undo"] = {"done": False, "dry_run": True, "argv": a["undo"]["argv"],
                               "message": f"would run `{shlex.join(a['undo']['argv'])}` (restores "
                                          f"{hd.Value(**{k: a['args']['previous'][k] for k in ('state', 'value')}, detail='').describe()}); "
                                          "add --apply to do it"}
    elif apply_:
        ok, msg, aid = hd.apply(runner, db)
        doc["apply"] = {"done": ok, "message": msg, "action_id": aid}
    if opts.as_json:
        _dump(doc)
    else:
        if why_not:
            click.echo(f"not a macOS host: {why_not}.")
        else:
            click.echo(f"{hd.DOMAIN} {hd.KEY}: {current.describe() if current else 'unknown'}")
        for a in mine:
            state = f"undone {a['undone_at']}" if a["undone_at"] else a["result"]
            click.echo(f"  capscan action {a['id']} at {a['at']}: set it (was "
                       f"{a['args']['previous'].get('value') or 'not set'}); {state}")
        for key in ("apply", "undo"):
            if key in doc:
                click.echo(doc[key]["message"])
        if not apply_ and not undo_ and current is not None and not current.enabled:
            click.echo(f"`--apply` would run: {shlex.join(hd.WRITE_TRUE)}")
        click.echo(hd.RESTART)
        click.echo(hd.SUFFICIENT)
    if (apply_ and not doc.get("apply", {}).get("done", True)) or (
            undo_ and apply_ and pending and not doc["undo"]["done"]):
        sys.exit(EXIT_UNVERIFIED)


# --------------------------------------------------------------------------- undo / status


@remedy.command("undo")
@click.option("--apply", "apply_", is_flag=True, help="Do it (otherwise: show what would be put back).")
@click.option("--id", "action_id", type=int, default=None, help="Only this recorded action.")
@_common
def undo_cmd(opts, apply_, action_id) -> None:
    """Put back what capscan changed, from its records (dry run without --apply)."""
    from analyzer.remedy import hostdefault as hd

    db = _open(opts)
    runner = Runner()
    todo = records.undoable(db)
    if action_id is not None:
        todo = [a for a in todo if a["id"] == action_id]
        if not todo:
            a = records.get(db, action_id)
            raise _error(f"action {action_id} " + ("does not exist" if a is None else
                         "has nothing to undo" if not (a["undo"] or {}).get("argv") else "is already undone"))
    results = []
    for a in todo:
        entry = {"action_id": a["id"], "action": a["action"], "argv": a["undo"]["argv"]}
        if not apply_:
            entry.update(done=False, dry_run=True, message=f"would run `{shlex.join(a['undo']['argv'])}`")
        elif a["action"] == hd.ACTION:
            why_not = _on_host(runner)
            if why_not:
                entry.update(done=False, message=f"skipped: {why_not}")
            else:
                ok, msg = hd.undo_action(runner, db, a)
                entry.update(done=ok, message=msg)
        else:
            entry.update(done=False, message=f"capscan does not know how to undo {a['action']!r}")
        results.append(entry)
    if opts.as_json:
        _dump({"apply": apply_, "undo": results})
    else:
        if not results:
            click.echo("nothing to undo: capscan has no applied changes on record (remedy run changes only its "
                       "child's environment).")
        for r in results:
            click.echo(f"action {r['action_id']} ({r['action']}): {r['message']}")
        if results and not apply_:
            click.echo("dry run: add --apply to do it.")
    if apply_ and any(not r["done"] for r in results):
        sys.exit(EXIT_UNVERIFIED)


@remedy.command("status")
@_common
def status_cmd(opts) -> None:
    """What capscan changed, from its records, and what is injected right now."""
    db = _open(opts)
    acts = records.actions(db)
    links = records.links(db)
    injected = {v: os.environ[v] for v in plat.all_injection_vars() if os.environ.get(v)}
    shim_vars = {v: os.environ[v] for v in (plat.FAMILY_VAR, *plat.ALIAS_FAMILY_VARS) if v in os.environ}
    pending = records.undoable(db)
    if opts.as_json:
        _dump({"actions": acts, "run_links": links, "pending_undo": [a["id"] for a in pending],
               "environment": {**injected, **shim_vars}})
        return
    if not acts:
        click.echo("capscan remedy has done nothing yet.")
    for a in acts:
        undo = ("undone " + a["undone_at"]) if a["undone_at"] else (
            "undo: " + shlex.join(a["undo"]["argv"]) if (a["undo"] or {}).get("argv") else
            (a["undo"] or {}).get("why", "nothing to undo"))
        what = shlex.join(a["args"].get("argv") or []) if a["action"] != "dylib-checksum" else a["args"].get("path")
        click.echo(f"{a['id']:>4}  {a['at']}  {a['action']:<15} {a['result']:<24} {what}\n      {undo}")
    for l in links:
        click.echo(f"run {l['run_id']} <- stock run {l['stock_run_id']} ({l['relation']}, action {l['action_id']})")
    for k, v in {**injected, **shim_vars}.items():
        click.echo(f"in this shell: {k}={v}")
    if pending:
        click.echo(f"{len(pending)} change(s) can be put back: capscan remedy undo --apply")


# --------------------------------------------------------------------------- probe


def _probe_path(runner: Runner) -> Path:
    from analyzer.remedy import dylib as dylibmod

    inj = plat.injection("darwin")
    path = dylibmod.build_dir(inj) / "capscan-probe"  # type: ignore[arg-type]
    if not path.exists():
        check = dylibmod.build(runner, inj)  # type: ignore[arg-type]
        if check.failed or not path.exists():
            raise _error(f"capscan-probe is not built and building it failed: {check.reason}")
    return path


@click.command("probe", context_settings={"ignore_unknown_options": True})
@click.option("--probe", "probe_path", type=click.Path(dir_okay=False), default=None,
              help="Run this probe binary instead (e.g. the Linux fake in native/interposer/build/linux/).")
@click.option("--force", is_flag=True, help="Store the output even if the same output was stored before.")
@click.option("--fail-on", "fail_on", default=None, metavar="VERDICT[,VERDICT...]",
              help="Exit 1 when the probe's run has one of these verdicts.")
@click.argument("probe_args", nargs=-1, type=click.UNPROCESSED)
@_via_options
@_common
def probe(opts, probe_path, force, probe_args, via, vm, guest_capscan) -> None:
    """Run the native capability probe, store its output as a run, print the diagnosis."""
    _via(opts, via, vm, guest_capscan, ["probe", *(["--force"] if force else []),
                                        *(["--", *probe_args] if probe_args else [])])
    from analyzer.cli import _notice, diagnose_runs, emit_report
    from analyzer.ingest import ingest
    from analyzer.reader import Input, InputError

    runner = Runner(timeout=120)
    if probe_path is None:
        if plat.system() != "darwin":
            raise _error(f"the Metal probe runs on macOS only (this is {plat.system()}); "
                         "pass --probe PATH to run another probe binary")
        exe = _probe_path(runner)
    else:
        exe = Path(probe_path)
    args = [a for a in probe_args if a != "--"]
    result = runner.run([str(exe), *args])
    if result.stderr:
        click.echo(result.stderr.rstrip("\n"), err=True)
    if not result.found:
        raise _error(f"{exe}: not found")
    if result.returncode != 0:
        msg = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise _error(f"{exe.name} failed: {msg}")
    data = (result.stderr + result.stdout).encode()
    db = _open(opts)
    try:
        res = ingest(db, Input("capscan-probe", io.BytesIO(data)), force=force)
    except InputError as exc:
        raise _error(str(exc)) from None
    _notice(res)
    emit_report(opts, diagnose_runs(db, res.run_ids))
