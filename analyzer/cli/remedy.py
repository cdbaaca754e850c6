"""``capscan remedy plan|run|env|host-default|undo|status``: the click side.

What each step does lives in analyzer.remedy (plan, preflight, launch,
hostdefault, records, prefix); this module reads options, calls it, and
prints the result.

Exit codes: 0 done (remedy run: verified); 1 remedy run launched but the fix
was not verified; 2 usage error, or a refusal (preflight failed, or the run is
not a fixable capability-downgrade); 130 interrupted.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import TYPE_CHECKING, Any, TextIO

import click

from analyzer.cli.exits import EXIT_REFUSED, EXIT_UNVERIFIED, CapscanError
from analyzer.cli.lazy import PhraseGroup
from analyzer.cli.options import open_db, open_existing_db
from analyzer.cli.output import Result, output_options, write
from analyzer.cli.via import via_options

if TYPE_CHECKING:
    from analyzer.remedy.check import Check


def _refuse(opts, reason: str, *, checks: list[Check] | None = None, extra: dict | None = None) -> None:
    """Print why nothing is done (the checks and the reason on stderr, or the --json document) and exit 2."""
    def human(out: TextIO) -> None:
        for c in checks or []:
            click.echo(c.line(), err=True)
        click.echo(f"capscan: refusing: {reason}", err=True)

    write(opts, Result(human=human, doc={"refused": True, "reason": reason,
                                         "checks": [c.to_json() for c in checks or []], **(extra or {})},
                       exit_code=EXIT_REFUSED))


NO_STOCK_RUN = "no stock run stored yet: run the command once on its own and pipe it in (CMD 2>&1 | capscan)"


def _stock_run(db, run_id: int | None, last: bool) -> int:
    from analyzer.store import remedy_records as records
    from analyzer.store.queries import last_run_id

    if run_id is not None:
        return run_id
    rid = last_run_id(db) if last else records.latest_stock_run(db)
    if rid is None:
        raise CapscanError(NO_STOCK_RUN)
    return rid


# --------------------------------------------------------------------------- group


@click.group(cls=PhraseGroup)
def remedy() -> None:
    """Fix what the diagnosis says is fixable, prove it from the new log, refuse otherwise.

    Dry run unless --apply for anything that changes the system; `remedy run`
    changes only its child's environment.
    """


# --------------------------------------------------------------------------- plan


@remedy.command("plan")
@click.option("--run", "run_id", type=int, default=None,
              help="The stock run (default: the newest capability-downgrade run, else the newest run; runs "
                   "made by remedy aside).")
@click.option("--last", is_flag=True, help="The newest stored run.")
@click.option("--stand-in", is_flag=True,
              help="For developers, on Linux: plan the LD_PRELOAD stand-in here (the fake Metal device) instead of "
                   "the macOS guest's commands.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@via_options
@output_options("db", "json")
def plan_cmd(opts, run_id, last, stand_in, command) -> Result:
    """The exact steps that remedy a run, or why nothing should be done.

    The steps are the macOS guest's (run them there, or the last one from the
    host with --via), whatever machine reads the log. Optionally the command
    to remedy after --: capscan remedy plan --run 7 -- llama-bench -m m.gguf
    """
    from analyzer.remedy import platform as plat
    from analyzer.remedy.plan import build_plan
    from analyzer.remedy.runner import Runner
    from analyzer.store import remedy_records as records

    if stand_in and plat.system() != "linux":
        raise click.UsageError(f"--stand-in plans the Linux stand-in; this machine is {plat.system()}")
    db = open_existing_db(opts)  # a plan only reads: never creates a database (a mistyped --db is an error)
    if db is None:
        raise CapscanError(f"no run {run_id}" if run_id is not None else NO_STOCK_RUN)
    # unnamed, the plan is for the newest downgraded run: the newest run may be the host's, with nothing to do
    chosen = None
    if run_id is None and not last:
        run_id = records.latest_stock_run(db, downgraded=True)
        chosen = ("the newest capability-downgrade run" if run_id is not None else
                  "the newest run: no capability-downgrade run is stored")
    rid = _stock_run(db, run_id, last)
    p = build_plan(db, rid, command=list(command) or None, runner=Runner(), stand_in=stand_in)
    if chosen:
        p["chosen"] = chosen
    if p["verdict"] is None and not opts.as_json:
        raise CapscanError(p["refusal"])

    def human(out: TextIO) -> None:
        out.write(f"run {rid}: {p['verdict']}" + ("  (fixable)" if p.get("fixable") else "")
                  + (f"  ({chosen}; --run ID for another)" if chosen else "") + "\n")
        if not p["actionable"]:
            out.write(f"nothing to do: {p['refusal']}\n")
            return
        if p.get("where") == "guest":
            out.write(f"in the macOS guest (this machine is {p['platform']}; the last step from the host below):\n")
        for i, s in enumerate(p["steps"], 1):
            out.write(f"{i}. {s['title']}\n   $ {s['shell']}\n   check: {s['check']}\n")
        if p.get("via"):
            out.write("or from the host, the last step through the VM tool (every option is forwarded):\n")
            for v in p["via"]:
                out.write(f"   $ {v['shell']}\n")
        for n in p.get("notes", []):
            out.write(f"note: {n}\n")

    return Result(human=human, doc=p)


# --------------------------------------------------------------------------- run


def _flag(v: Any) -> str:
    return "-" if v is None else ("yes" if v is True else "no" if v is False else str(v))


def _print_compare(cmp: dict[str, Any], out) -> None:
    from analyzer import chips
    from analyzer.chips import family_name

    b, a = cmp["before"], cmp["after"] or {}
    rows = [("family", f"{family_name(b['apple_family'])} ({b['apple_family']})",
             f"{family_name(a.get('apple_family'))} ({a.get('apple_family')})")]
    for k in chips.KERNEL_FLAGS:
        label = chips.METAL_FLAG[k].label
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
              help="Inject this library instead of the one capscan picks (a make macos-native build, else "
                   "the prebuilt one it ships).")
@click.option("--inject-children", is_flag=True,
              help="Let the programs the command starts inherit the library too (ollama: its runner does the GPU "
                   "work). By default the interposer drops itself from the variable once loaded.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@via_options
@output_options("db", "json")
def run_cmd(opts, family_spec, run_id, last, dylib_path, inject_children, command) -> Result:
    """Launch CMD with the interposer injected, store and verify the new run.

    capscan remedy run [--family auto|N] -- CMD ARGS...
    """
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CapscanError("nothing to run: capscan remedy run -- CMD ARGS...")
    from analyzer.diagnosis import UNDIAGNOSED
    from analyzer.pipeline import diagnose_and_store
    from analyzer.remedy import launch as L
    from analyzer.remedy import platform as plat
    from analyzer.remedy.plan import refusal_for
    from analyzer.remedy.preflight import run_preflight, scrub_for
    from analyzer.remedy.runner import Runner

    db = open_db(opts)
    L.reconcile(db)  # what a capscan that died left 'running' is marked lost first
    stock_id = _stock_run(db, run_id, last)
    stock = next(iter(diagnose_and_store(db, [stock_id], refresh_peers=False)), None)
    if stock is None:
        raise CapscanError(f"no run {stock_id}")
    diag = stock.diagnosis or UNDIAGNOSED  # (diagnose_runs diagnoses every run it returns; unknown refuses)
    runner = Runner()
    refusal = refusal_for(stock, diag, runner)  # a host the log does not show is checked on this machine
    if refusal:
        _refuse(opts, f"run {stock_id} is {diag.verdict}: {refusal}",
                extra={"stock_run_id": stock_id, "verdict": diag.verdict})
    shim = stock.facts.shim.as_dict() if stock.facts.shim else None
    checks, inj, family, lib = run_preflight(db, cmd=cmd, family_spec=family_spec, diag=diag, stock_shim=shim,
                                             dylib_path=dylib_path, runner=runner, inject_children=inject_children,
                                             kernels=True)
    bad = [c for c in checks if c.failed]
    if bad or inj is None or family is None or lib is None or lib.choice is None:
        _refuse(opts, f"{len(bad)} preflight check(s) failed; nothing was launched", checks=checks,
                extra={"stock_run_id": stock_id})
    if not opts.as_json:
        click.echo(f"capscan: stock run {stock_id} ({diag.verdict}); preflight:", err=True)
        for c in checks:
            click.echo(c.line(), err=True)
    library = str(lib.choice.path)
    click.echo(f"capscan: launching with {inj.env_var}={library} {plat.FAMILY_VAR}={family}: {shlex.join(cmd)}",
               err=True)
    action_id = L.record_run(db, cmd=cmd, family=family, library=library, sha256=lib.sha256, inj=inj,
                             stock_run_id=stock_id)
    env = L.child_env(runner.env, inj, library, family, inject_children=inject_children, scrub=scrub_for(checks))
    out_sink = sys.stderr.buffer if opts.as_json else sys.stdout.buffer
    sys.stdout.flush()
    sys.stderr.flush()
    outcome = L.launch(db, cmd, env, out=out_sink, err=sys.stderr.buffer, action_id=action_id)
    cmp = L.settle(db, outcome, stock=stock, family=family, inj=inj, action_id=action_id)
    failed_checks = [c for c in outcome.checks if c.failed]
    doc = {"refused": False, "stock_run_id": stock_id, "run_ids": outcome.run_ids, "family": family,
           "injection": {"env_var": inj.env_var, "library": library, "sha256": lib.sha256},
           "preflight": [c.to_json() for c in checks], "verification": [c.to_json() for c in outcome.checks],
           "verified": outcome.verified, "compare": cmp, "returncode": outcome.returncode, "action_id": action_id}

    def human(out: TextIO) -> None:
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

    return Result(human=human, doc=doc, exit_code=0 if outcome.verified else EXIT_UNVERIFIED)


# --------------------------------------------------------------------------- env


@remedy.command("env", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--shell", type=click.Choice(["sh", "zsh", "fish"]), default="sh", show_default=True,
              help="Quote for this shell (bash: sh).")
@click.option("--family", "family_spec", default="auto", show_default=True)
@click.option("--run", "run_id", type=int, default=None, help="The stock run whose diagnosis applies.")
@click.option("--last", is_flag=True)
@click.option("--dylib", "dylib_path", type=click.Path(dir_okay=False), default=None)
@click.option("--inject-children", is_flag=True,
              help="Let the programs the command starts inherit the library too (ollama: its runner does the GPU "
                   "work). By default the interposer drops itself from the variable once loaded.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@via_options
@output_options("db", "json")
def env_cmd(opts, shell, family_spec, run_id, last, dylib_path, inject_children, command) -> Result:
    """The prefix for launching one command yourself: /usr/bin/env DYLD_INSERT_LIBRARIES=... CMD.

    capscan remedy env [-- CMD ARGS...]: with CMD, the whole line (after checking
    every binary CMD's launch runs through); without, the prefix to put in front
    of it. Never an `export`: the variables reach that one command only.
    """
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    from analyzer.diagnosis import UNDIAGNOSED, Diagnosis
    from analyzer.pipeline import diagnose_and_store
    from analyzer.remedy import prefix as px
    from analyzer.remedy.plan import refusal_for
    from analyzer.remedy.preflight import run_preflight, scrub_for
    from analyzer.remedy.runner import Runner
    from analyzer.store import remedy_records as records

    db = open_db(opts)
    diag: Diagnosis | None = None
    shim = None
    rid = run_id if run_id is not None else (_stock_run(db, None, True) if last else records.latest_stock_run(db))
    if rid is not None:
        stock = next(iter(diagnose_and_store(db, [rid], refresh_peers=False)), None)
        if stock is None:
            raise CapscanError(f"no run {rid}")
        diag = stock.diagnosis or UNDIAGNOSED  # (diagnose_runs diagnoses every run it returns; unknown refuses)
        refusal = refusal_for(stock, diag, Runner())
        if refusal:
            _refuse(opts, f"run {rid} is {diag.verdict}: {refusal}")
        shim = stock.facts.shim.as_dict() if stock.facts.shim else None
    runner = Runner()
    checks, inj, family, lib = run_preflight(db, cmd=cmd or None, family_spec=family_spec, diag=diag,
                                             stock_shim=shim, dylib_path=dylib_path, runner=runner,
                                             inject_children=inject_children, kernels=True)
    if any(c.failed for c in checks) or family is None or lib is None or lib.choice is None or inj is None:
        _refuse(opts, "preflight failed; nothing printed", checks=checks)
    prefix = px.prefix_argv(inj, str(lib.choice.path), family, inject_children=inject_children,
                            scrub=scrub_for(checks))
    line = px.quote(shell, prefix + cmd)
    env_var = inj.env_var

    def human(out: TextIO) -> None:
        for c in checks:
            click.echo(c.line(), err=True)
        if rid is None:
            click.echo("capscan: no stored run: nothing confirms this machine is a fixable guest; you vouch for it.",
                       err=True)
        else:
            chosen = "as asked (--run)" if run_id is not None else (
                "the newest stored run (--last)" if last else "the newest stored run not made by capscan remedy")
            click.echo(f"capscan: for stock run {rid} ({diag.verdict if diag else None}), {chosen}; `--run N` picks another "
                       "(`capscan runs` lists them).", err=True)
        out.write(line + "\n")
        out.flush()
        if not cmd:
            click.echo(f"capscan: put the line above in front of the one command to remedy (e.g. ... llama-bench -m "
                       f"model.gguf); {env_var} then reaches that command and what it starts, never your shell. "
                       "`capscan remedy env -- CMD ARGS` also checks every binary CMD runs through.", err=True)

    return Result(human=human, doc={"shell": shell, "env": dict(a.split("=", 1) for a in prefix[1:]),
                                    "prefix": prefix, "command": cmd or None, "line": line, "run_id": rid,
                                    "checks": [c.to_json() for c in checks]})


# --------------------------------------------------------------------------- host default


@remedy.command("host-default")
@click.option("--status", "mode", flag_value="status", default=True, help="Show the current value (default).")
@click.option("--apply", "apply_", is_flag=True, help="Set it (records the value it replaces); with --undo: do it.")
@click.option("--undo", "undo_", is_flag=True, help="Put back the value capscan replaced (dry run without --apply).")
@output_options("db", "json")
def host_default_cmd(opts, mode, apply_, undo_) -> Result:
    """The host's com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel."""
    from analyzer.remedy import hostdefault as hd
    from analyzer.remedy.runner import Runner
    from analyzer.store import remedy_records as records

    runner = Runner()
    # only --apply (setting it) records something: otherwise a missing database is not created
    db = open_db(opts) if apply_ and not undo_ else open_existing_db(opts)
    why_not = hd.why_not_host(runner)
    if why_not and (apply_ or undo_):
        raise CapscanError(f"not changing it: {why_not}")
    current = hd.read(runner) if not why_not else None
    mine = [hd.public_record(a) for a in records.actions(db, hd.ACTION)] if db is not None else []
    pending = [a for a in records.undoable(db) if a["action"] == hd.ACTION] if db is not None else []
    doc: dict[str, Any] = {"domain": hd.DOMAIN, "key": hd.KEY, "host": why_not is None, "why_not_host": why_not,
                           "current": current.to_json() if current else None, "records": mine,
                           "restart": hd.RESTART, "note": hd.SUFFICIENT}
    if undo_:
        if not pending:
            doc["undo"] = {"done": False, "message": "capscan has not changed this default (nothing recorded)."}
        else:
            a = pending[0]
            plan = hd.undo_plan(a)  # capscan's own command, rebuilt from the record: its stored argv never runs
            if apply_:
                ok, msg = hd.undo_action(runner, db, a)
                doc["undo"] = {"done": ok, "message": msg, "action_id": a["id"], "argv": plan.argv}
            elif plan.refused or plan.argv is None or plan.previous is None:
                doc["undo"] = {"done": False, "dry_run": True, "argv": None, "action_id": a["id"],
                               "message": plan.refused or "refusing this record"}
            else:
                doc["undo"] = {"done": False, "dry_run": True, "argv": plan.argv, "action_id": a["id"],
                               "message": f"would run `{shlex.join(plan.argv)}` (restores "
                                          f"{plan.previous.describe()}); add --apply to do it"}
    elif apply_:
        ok, msg, aid = hd.apply(runner, db)
        doc["apply"] = {"done": ok, "message": msg, "action_id": aid}
    def human(out: TextIO) -> None:
        if why_not:
            out.write(f"not a macOS host: {why_not}.\n")
        else:
            out.write(f"{hd.DOMAIN} {hd.KEY}: {current.describe() if current else 'unknown'}\n")
        for a in mine:
            state = f"undone {a['undone_at']}" if a["undone_at"] else a["result"]
            prev = a["args"].get("previous")
            was = prev.get("value") if isinstance(prev, dict) else None
            out.write(f"  capscan action {a['id']} at {a['at']}: set it (was {was or 'not set'}); {state}\n")
        for key in ("apply", "undo"):
            if key in doc:
                out.write(doc[key]["message"] + "\n")
        if not apply_ and not undo_ and current is not None and not current.enabled:
            out.write(f"`--apply` would run: {shlex.join(hd.WRITE_TRUE)}\n")
        out.write(hd.RESTART + "\n")
        out.write(hd.SUFFICIENT + "\n")

    failed = (apply_ and not doc.get("apply", {}).get("done", True)) or (
        undo_ and bool(pending) and not doc["undo"]["done"] and (apply_ or doc["undo"]["argv"] is None))
    return Result(human=human, doc=doc, exit_code=EXIT_UNVERIFIED if failed else 0)


# --------------------------------------------------------------------------- undo / status


@remedy.command("undo")
@click.option("--apply", "apply_", is_flag=True, help="Do it (otherwise: show what would be put back).")
@click.option("--id", "action_id", type=int, default=None, help="Only this recorded action.")
@output_options("db", "json")
def undo_cmd(opts, apply_, action_id) -> Result:
    """Put back what capscan changed, from its records (dry run without --apply)."""
    from analyzer.remedy import hostdefault as hd
    from analyzer.remedy.runner import Runner
    from analyzer.store import remedy_records as records

    db = open_existing_db(opts)  # no database: nothing recorded to undo (a mistyped --db is an error)
    runner = Runner()
    todo = records.undoable(db) if db is not None else []
    if action_id is not None:
        todo = [a for a in todo if a["id"] == action_id]
        if not todo:
            a = records.get(db, action_id) if db is not None else None
            raise CapscanError(f"action {action_id} " + ("does not exist" if a is None else
                         "is already undone" if a["undone_at"] else "has nothing to undo"))
    results = []
    for a in todo:
        # the record is data: the command is capscan's own, rebuilt from it (hd.undo_plan); its argv never runs
        plan = hd.undo_plan(a)
        entry: dict[str, Any] = {"action_id": a["id"], "action": str(a["action"]), "argv": plan.argv}
        if plan.refused or plan.argv is None:
            entry.update(done=False, refused=True, message=plan.refused or "refusing this record; nothing runs")
        elif not apply_:
            entry.update(done=False, dry_run=True, message=f"would run `{shlex.join(plan.argv)}`")
        else:
            why_not = hd.why_not_host(runner)
            if why_not:
                entry.update(done=False, message=f"skipped: {why_not}")
            else:
                ok, msg = hd.undo_action(runner, db, a)
                entry.update(done=ok, message=msg)
        results.append(entry)
    def human(out: TextIO) -> None:
        if not results:
            out.write("nothing to undo: capscan has no applied changes on record (remedy run changes only its "
                      "child's environment).\n")
        for r in results:
            out.write(f"action {r['action_id']} ({r['action']}): {r['message']}\n")
        if results and not apply_:
            out.write("dry run: add --apply to do it.\n")

    failed = any(r.get("refused") for r in results) or (apply_ and any(not r["done"] for r in results))
    return Result(human=human, doc={"apply": apply_, "undo": results}, exit_code=EXIT_UNVERIFIED if failed else 0)


@remedy.command("status")
@output_options("db", "json")
def status_cmd(opts) -> Result:
    """What capscan changed, from its records, and what is injected right now."""
    from analyzer.remedy import platform as plat
    from analyzer.store import remedy_records as records
    from analyzer.store.db import is_read_only

    db = open_existing_db(opts)  # never creates a database
    if db is not None and not is_read_only(db):
        from analyzer.remedy.launch import reconcile

        reconcile(db)  # a record a capscan that died left 'running' says 'lost' from now on
    from analyzer.remedy import hostdefault as hd

    acts = [hd.public_record(a) for a in records.actions(db)] if db is not None else []
    links = records.links(db) if db is not None else []
    injected = {v: os.environ[v] for v in plat.all_injection_vars() if os.environ.get(v)}
    shim_vars = {v: os.environ[v] for v in (plat.FAMILY_VAR, *plat.ALIAS_FAMILY_VARS) if v in os.environ}
    pending = records.undoable(db) if db is not None else []
    def human(out: TextIO) -> None:
        if not acts:
            out.write("capscan remedy has done nothing yet.\n")
        for a in acts:  # hd.public_record: an undo is capscan's rebuilt command, or why the record is refused
            u = a["undo"] or {}
            undo = ("undone " + str(a["undone_at"])) if a["undone_at"] else (
                "undo: " + shlex.join(u["argv"]) if u.get("argv") else
                "undo " + u["refused"] if u.get("refused") else u.get("why", "nothing to undo"))
            argv = a["args"].get("argv")
            what = (shlex.join(str(x) for x in argv) if isinstance(argv, list) else "") \
                if a["action"] != "dylib-checksum" else a["args"].get("path")
            out.write(f"{a['id']:>4}  {a['at']}  {str(a['action']):<15} {str(a['result']):<24} {what}\n"
                      f"      {undo}\n")
        for link in links:
            action = "" if link["action_id"] is None else f", action {link['action_id']}"  # selftest: no action
            out.write(f"run {link['run_id']} <- stock run {link['stock_run_id']} ({link['relation']}{action})\n")
        for k, v in {**injected, **shim_vars}.items():
            out.write(f"in this shell: {k}={v}\n")
        if pending:
            out.write(f"{len(pending)} change(s) can be put back: capscan remedy undo --apply\n")

    return Result(human=human, doc={"actions": acts, "run_links": links, "pending_undo": [a["id"] for a in pending],
                                    "environment": {**injected, **shim_vars}})


# --------------------------------------------------------------------------- selftest


def _yn(v: Any) -> str:
    return "-" if v is None else ("yes" if v is True else "no" if v is False else str(v))


def _printable(text: str) -> str:
    """Device names and interposer lines come from other programs: no control, format or bidi characters."""
    import unicodedata

    return "".join("?" if unicodedata.category(c).startswith("C") else c for c in text)


def _print_selftest(doc: dict[str, Any], out: TextIO) -> None:
    from analyzer import chips
    from analyzer.chips import family_name

    runs = doc["runs"]
    title = "capscan remedy selftest"
    if doc["stand_in"]:
        title += " (Linux stand-in: LD_PRELOAD and the fake Metal device, not a GPU)"
    print(title, file=out)
    labels = [k for k in ("stock", "capscan", "other-shim") if k in runs]
    head = "".join(f"{(k + ' (run ' + ','.join(map(str, runs[k]['run_ids'])) + ')'):<26}" for k in labels)
    print(f"  {'':<23}{head}", file=out)
    rows = [
        ("device", lambda m: m["device"] or "-"),
        ("Apple family", lambda m: f"{family_name(m['apple_family'])} ({m['apple_family']})" if m["apple_family"]
         else "-"),
        ("Metal3 / Metal4", lambda m: f"{_yn(m['metal3'])} / {_yn(m['metal4'])}"),
        ("threadgroup memory", lambda m: _yn(m["max_threadgroup_memory"])),
        *((chips.METAL_FLAG[k].label, lambda m, k=k: _yn(m[k])) for k in chips.KERNEL_FLAGS),
    ]
    for name, get in rows:
        cells = "".join(f"{_printable(str(get(runs[k]['matrix'])))[:24]:<26}" for k in labels)
        print(f"  {name:<23}{cells}", file=out)
    bench = doc.get("llama_bench") or {}
    for label in ("capscan", "other-shim"):
        for test, s in (bench.get(f"{label}_speedup") or {}).items():
            print(f"  llama-bench {test} ({label}): {s['before']:,.2f} -> {s['after']:,.2f} t/s "
                  f"({s['ratio']:.2f}x)", file=out)
    print(f"verdict: {doc['verdict']}: {doc['meaning']}", file=out)
    if doc["reason"]:
        print(f"  why: {_printable(doc['reason'])}", file=out)
    print(f"send back: {doc['send_back']}", file=out)


@remedy.command("selftest")
@click.option("--family", "family_spec", default="auto", show_default=True,
              help="The Apple family cap: auto (the host chip's, from this guest's CPU) or a code such as 1007.")
@click.option("--dylib", "dylib_path", type=click.Path(dir_okay=False), default=None,
              help="Test this library instead of the one capscan picks (a make macos-native build, else "
                   "the prebuilt one it ships).")
@click.option("--probe", "probe_path", type=click.Path(dir_okay=False), default=None,
              help="Run this probe binary instead of capscan-probe.")
@click.option("--llama-bench", "llama_bench", default=None, metavar="PATH",
              help="Also run a short llama-bench (-p 128 -n 32 -r 2) stock and remedied; store the speed-up.")
@click.option("-m", "--model", "model", default=None, metavar="MODEL", help="The model for --llama-bench.")
@click.option("--compare-shim", "compare_shim", default=None, metavar="PATH",
              help="A third run with another shim (Lume, Tart, Anka) injected instead, for an A/B.")
@click.option("--bundle", "bundle_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also run every check only a Mac can settle and write them, with the runs' logs, to FILE (one "
                   "JSON file to attach to an issue; `capscan schema --for bundle`).")
@click.option("--redact/--no-redact", default=True, show_default=True,
              help="--bundle: replace home directories, user and host names (by ~, <user>, <host>).")
@click.option("--llama-build", "llama_build", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="--bundle: a llama.cpp build directory; runs its test-backend-ops -o MUL_MAT, FLASH_ATTN_EXT "
                   "and SOFT_MAX under the library.")
@click.option("--python", "python", type=click.Path(dir_okay=False), default=None, metavar="PATH",
              help="--bundle: the framework Python to test (default: python3 on PATH, python.org's, Homebrew's).")
@click.option("--host-default-set", is_flag=True,
              help="--bundle: you set `capscan remedy host-default --apply` on the host and stopped and started "
                   "this VM since; the bundle records it and checks the stock device.")
@via_options
@output_options("db", "json")
def selftest_cmd(opts, family_spec, dylib_path, probe_path, llama_bench, model, compare_shim, bundle_path, redact,
                 llama_build, python, host_default_set) -> Result:
    """Prove the remedy on this machine: probe stock vs remedied, store both, one verdict.

    Verdicts: works, interposing-disabled, refused-by-hardened-runtime,
    arm64e-missing, not-a-vm (inconclusive otherwise). Exit 0 only for works.
    On Linux it runs against the LD_PRELOAD stand-in and says so.

    With --bundle FILE it also writes what a real Mac needs to confirm, check
    by check, to FILE ("Help confirm it on a real Mac" in docs/remedy.md).
    """
    if model and not llama_bench and not bundle_path:
        raise CapscanError("-m/--model goes with --llama-bench PATH")
    if not bundle_path and (llama_build or python or host_default_set or not redact):
        raise CapscanError("--llama-build, --python, --host-default-set and --no-redact go with --bundle FILE")
    if bundle_path and not os.path.isdir(os.path.dirname(os.path.abspath(bundle_path))):
        # said now, not after minutes of checks
        raise CapscanError(f"{bundle_path}: cannot write the bundle (no such directory)")
    from analyzer.remedy.runner import Runner
    from analyzer.remedy.selftest import WORKS, run_selftest

    db = open_db(opts)
    runner = Runner()
    if bundle_path and llama_bench is None:   # the bundle's speed check takes the llama-bench on PATH
        llama_bench = runner.which("llama-bench")
    report = run_selftest(db, runner=runner, family_spec=family_spec, dylib_path=dylib_path,
                          probe_path=probe_path, llama_bench=llama_bench, model=model, compare_shim=compare_shim)
    doc = report.to_json()
    bundle = None
    if bundle_path:
        from analyzer.cli.output import write_atomically
        from analyzer.remedy.bundle import build_bundle

        bundle = build_bundle(report, runner=runner, llama_bench=llama_bench, python=python,
                              llama_build=llama_build, host_default_set=host_default_set, redact=redact)
        text = bundle.model_dump_json(indent=2) + "\n"
        write_atomically(bundle_path, lambda fh: fh.write(text), prefix=".capscan-bundle-", suffix=".json",
                         what="the bundle")
        doc = {**doc, "bundle": {"path": bundle_path,
                                 "hypotheses": {h.name: h.status for h in bundle.hypotheses}}}

    def human(out: TextIO) -> None:
        for c in report.checks:
            if c.status in ("fail", "warn"):
                click.echo(_printable(c.line()).replace("?        instead", "\n        instead"), err=True)
        _print_selftest(doc, out)
        if bundle is not None:
            print(f"bundle: {_printable(bundle_path)}", file=out)
            for h in bundle.hypotheses:
                why = f" ({_printable(h.why)[:160]})" if h.why and h.status != "pass" else ""
                print(f"  {h.status:<12} {h.name}{why}", file=out)

    return Result(human=human, doc=doc, exit_code=0 if report.verdict == WORKS else EXIT_UNVERIFIED)
