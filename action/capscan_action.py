#!/usr/bin/env python3
"""The capscan GitHub Action's work (action.yml runs it as one step; docs/ci.md explains it).

It uses capscan only as a user would, through the `capscan` command and its --json contract, so it
needs nothing but the standard library (Python 3.9 and later: macOS's own python3 runs it when
`install: false`):

1. splits the `command` input into an argument list with shlex (POSIX shell words: quotes and
   backslashes work; no $VAR, ~, globs, pipes or redirections, because no shell ever sees it);
2. runs it once as is, its stdout and stderr through `capscan --tee` into a store of its own;
3. with `remedy: true` and a stock run proven fixable, runs it again through
   `capscan remedy run --json -- <command>`: capscan sets the library on the workload's own exec
   (exporting DYLD_INSERT_LIBRARIES through $GITHUB_ENV cannot work: each step runs under the
   SIP-protected /bin/bash, and dyld drops DYLD_* for it), verifies the new run and compares;
4. writes the job summary, the step's outputs, and at most one annotation, then exits 1 when the
   `fail-on` policy says so (default `unremedied,unknown`).

The workload's output is hostile text: while it runs, workflow commands are stopped
(`::stop-commands::`), so a log line cannot annotate, mask or set anything; the summary escapes
what it shows from a log.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

VERDICTS = ("capability-downgrade", "hardware-limit", "no-gpu-offload", "virtualization-overhead", "healthy",
            "unknown")
UNREMEDIED = "unremedied"  # a capability-downgrade not remedied and verified in this job
DEFAULT_FAIL_ON = "unremedied,unknown"
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

VM_NOTE = ("These numbers come from a VM on a shared runner: do not put them in upstream bug reports or "
           "compare them with bare metal. Speed between runs on hosted runners is noisy (two runs of one job "
           "often differ by 20-30%), so this verdict rests on the printed capability lines and the "
           "remedy's verification, never on a speed.")

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|~&])")


class Usage(Exception):
    """Bad input to the Action: one line, exit 2."""


# --------------------------------------------------------------------------- workflow commands


def escape_data(text: str) -> str:
    """A workflow command's message (GitHub's rules): % first, then CR and LF; other controls dropped."""
    text = _CONTROL.sub("", str(text))
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also : and ,."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotate(level: str, title: str, message: str) -> None:
    """A plain annotation: the input was a command's output, never a file GitHub could open."""
    emit(f"::{level} title={escape_property(title)}::{escape_data(message)}")


def emit(line: str) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def md(text: Any) -> str:
    """Log text in markdown: one line, no control characters, every markup character escaped."""
    text = _CONTROL.sub("", str(text)).replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


class CommandsStopped:
    """While the workload runs, the runner ignores workflow commands (a log line starting `::` is text)."""

    def __enter__(self) -> "CommandsStopped":
        self.token = "capscan-" + secrets.token_hex(16)
        emit(f"::stop-commands::{self.token}")
        return self

    def __exit__(self, *exc: object) -> None:
        emit(f"::{self.token}::")


# --------------------------------------------------------------------------- inputs


def parse_fail_on(value: str) -> List[str]:
    words = [w for w in re.split(r"[\s,]+", value.strip()) if w]
    if words in ([], ["none"]):
        return []
    bad = [w for w in words if w not in VERDICTS and w != UNREMEDIED]
    if bad:
        raise Usage(f"fail-on: unknown value {bad[0]!r}; choose from {UNREMEDIED}, {', '.join(VERDICTS)} or none")
    return words


def parse_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes", "1", "on"):
        return True
    if v in ("false", "no", "0", "off", ""):
        return False
    raise Usage(f"{name}: expected true or false, got {value!r}")


def split_command(text: str) -> List[str]:
    try:
        argv = shlex.split(text, comments=False, posix=True)
    except ValueError as exc:  # an unclosed quote
        raise Usage(f"command: cannot split it into words ({exc})") from None
    if not argv:
        raise Usage("command: nothing to run (give the llama.cpp/ollama/whisper command line)")
    return argv


# --------------------------------------------------------------------------- capscan


class Capscan:
    def __init__(self, exe: str, db: str):
        self.exe, self.db = exe, db

    def argv(self, *args: str) -> List[str]:
        return [self.exe, "--db", self.db, *args]

    def json(self, *args: str) -> Optional[Dict[str, Any]]:
        """A capscan command's --json document (its stderr goes to the job log), or None."""
        r = subprocess.run(self.argv(*args), stdout=subprocess.PIPE)
        try:
            return json.loads(r.stdout.decode("utf-8", "replace"))
        except ValueError:
            return None

    def text(self, *args: str) -> str:
        r = subprocess.run(self.argv(*args), stdout=subprocess.PIPE)
        return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else ""


def stock_run(cap: Capscan, argv: List[str]) -> int:
    """The command as is, its output through `capscan --tee` (stdout: the output; stderr: the report).
    Returns the command's exit status."""
    sys.stdout.flush()
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        raise Usage(f"command: cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    tee = subprocess.Popen(cap.argv("--tee", "--no-gha", "--name", f"stock {os.path.basename(argv[0])}"),
                           stdin=child.stdout)
    assert child.stdout is not None
    child.stdout.close()  # capscan holds the pipe: the command sees SIGPIPE if capscan goes away
    status = child.wait()
    tee.wait()
    return status


def speedups(compare: Optional[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    return dict((compare or {}).get("throughput") or {})


def headline_speedup(speed: Dict[str, Dict[str, float]]) -> str:
    """The `speedup` output: remedied / stock tok/s of the generation test (tg...), else the first test."""
    if not speed:
        return ""
    test = next((t for t in speed if t.startswith("tg")), next(iter(speed)))
    return f"{speed[test]['ratio']:.2f}"


def chart(speed: Dict[str, Dict[str, float]]) -> List[str]:
    """Stock and remedied bars per test, scaled to the faster of the two, in a code block."""
    if not speed:
        return []
    out = ["```text"]
    for test, s in speed.items():
        name = re.sub(r"[^A-Za-z0-9_.@+ -]", "?", test)[:24]
        top = max(s["before"], s["after"]) or 1.0
        for label, value in (("stock", s["before"]), ("remedied", s["after"])):
            bar = "█" * max(1, round(30 * value / top))
            out.append(f"{name:<10} {label:<9} {bar:<30} {value:,.2f} t/s")
        out.append(f"{'':<10} {'':<9} remedied / stock = {s['ratio']:.2f}x (derived)")
    out.append("```")
    return out


# --------------------------------------------------------------------------- the verdict


def first_stock_run(doc: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The run that decided the input's verdict (the most severe; the first of them)."""
    if not doc or not doc.get("runs"):
        return None
    verdict = doc["summary"]["verdict"]
    return next((r for r in doc["runs"] if r.get("verdict") == verdict), doc["runs"][0])


def decide(verdict: str, fixable: bool, remedied: Optional[Dict[str, Any]], remedy: bool,
           fail_on: List[str], stock_status: int) -> Optional[str]:
    """Why the job fails (the one annotation's message), or None when it passes."""
    verified = bool(remedied and remedied.get("verified"))
    if stock_status != 0:
        return (f"the command exited with status {stock_status}; its output is in the log above"
                + (" and capscan could not decide from it" if verdict == "unknown" else ""))
    if verdict in fail_on or (verdict == "capability-downgrade" and UNREMEDIED in fail_on and not verified):
        if verdict == "unknown":
            return ("capscan found no capability lines in the command's output (did it stop before its Metal "
                    "block?): run llama-bench with -o json, or llama-cli/llama-server with -lv 4, so the output "
                    "shows the GPU family and flags")
        if verdict != "capability-downgrade":
            return f"the run is {verdict}, which fail-on lists"
        if remedied is not None and remedied.get("refused"):
            return "capscan refused the remedy: " + str(remedied.get("reason") or "see the log above")
        if remedied is not None and not verified:
            failed = [c for c in remedied.get("verification") or [] if c.get("status") == "fail"]
            why = f"{failed[0].get('name')} failed: {failed[0].get('reason')}" if failed else "see the log above"
            return "the remedy ran but was not verified (" + why + ")"
        if verified:
            return "the run was remedied and verified, but fail-on lists capability-downgrade"
        if not fixable:
            return ("the VM's GPU under-reports its family (Apple5) and llama.cpp runs slow fallback paths, but the "
                    "log does not prove an Apple-silicon host: set `remedy: true` on this step (`capscan remedy "
                    "run` checks this machine's own host and refuses what it cannot prove), or run llama-bench "
                    "with -o json, whose cpu_info names the host chip")
        return ("the VM's GPU under-reports its family (Apple5) and llama.cpp runs slow fallback paths; "
                "fixable: set `remedy: true` on this step to rerun it through `capscan remedy run` and verify "
                "the fix")
    return None


def summary_lines(verdict: str, stock: Optional[Dict[str, Any]], remedied: Optional[Dict[str, Any]],
                  remedy_note: str, compare_md: str, failure: Optional[str], stock_status: int) -> List[str]:
    verified = bool(remedied and remedied.get("verified"))
    state = "failed" if failure else "passed"
    lines = [f"## capscan: {verdict}" + (" (remedied and verified)" if verified else "") + f" · {state}", ""]
    if stock is not None:
        lines.append(f"**run {int(stock['id'])}** ({md(stock.get('program') or 'unknown program')}): "
                     + md(sentence(stock)))
    else:
        lines.append("capscan found nothing it reads in the command's output.")
    if stock_status:
        lines.append(f"\nThe command exited with status {int(stock_status)}.")
    if failure:
        lines += ["", "**Why the job fails:** " + md(failure)]
    proof = (stock or {}).get("proof") or []
    if proof:
        lines += ["", "**Proof** (each from the guest's own lines):", ""]
        lines += [f"- line {int(p['line'])}: {md(p['sign'])}" for p in proof if p.get("line") is not None]
    if remedy_note:
        lines += ["", md(remedy_note)]
    if remedied is not None and remedied.get("verification"):
        lines += ["", "**Verification of the remedied run:**", ""]
        for c in remedied["verification"]:
            lines.append(f"- {md(c.get('status', '?'))} {md(c.get('name', '?'))}: {md(c.get('reason', ''))}")
    if compare_md.strip():
        lines += ["", "**Stock vs remedied** (the best printed figure of each; the ratio is derived; speed on "
                      "hosted runners is noisy):", "", compare_md.strip()]
    lines += [""] + chart(speedups((remedied or {}).get("compare")))
    # (a self-hosted bare-metal Mac runs the Action too: its numbers are no VM's)
    if (stock or {}).get("environment") != "bare-metal":
        lines += ["", "> " + VM_NOTE]
    lines.append("")
    return lines


def sentence(run: Dict[str, Any]) -> str:
    """The run's verdict in words: the first finding's message, else its fixable reason."""
    findings = run.get("findings") or []
    first = findings[0].get("message") if findings else None
    return first or run.get("fixable_reason") or str(run.get("verdict"))


def write_outputs(path: Optional[str], values: Dict[str, str]) -> None:
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for k, v in values.items():
            fh.write(f"{k}={_CONTROL.sub('', v).replace(chr(10), ' ').replace(chr(13), ' ')}\n")


def append(path: Optional[str], lines: List[str]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- main


def main() -> int:
    env = os.environ
    try:
        fail_on = parse_fail_on(env.get("INPUT_FAIL_ON", DEFAULT_FAIL_ON))
        remedy = parse_bool("remedy", env.get("INPUT_REMEDY", "false"))
        family = env.get("INPUT_FAMILY", "auto").strip() or "auto"
        if family != "auto" and not family.isdigit():
            raise Usage(f"family: expected auto or a family code such as 1007, got {family!r}")
        argv = split_command(env.get("INPUT_COMMAND", ""))
        work = tempfile.mkdtemp(prefix="capscan-action-", dir=env.get("RUNNER_TEMP") or None)
        exe = shutil.which(env.get("CAPSCAN_ACTION_CAPSCAN") or "capscan")
        if exe is None:
            raise Usage("capscan is not on PATH (with install: false, install it in an earlier step)")
        cap = Capscan(exe, os.path.join(work, "capscan.db"))
        print(f"capscan action: stock run of {shlex.join(argv)}", flush=True)
        with CommandsStopped():
            status = stock_run(cap, argv)
    except Usage as exc:
        annotate("error", "capscan: bad input", str(exc))
        return EXIT_USAGE
    doc = cap.json("diagnose", "--last", "--json", "--no-gha")
    stock = first_stock_run(doc)
    verdict = (doc or {}).get("summary", {}).get("verdict", "unknown")
    fixable = bool((doc or {}).get("summary", {}).get("fixable"))
    remedied: Optional[Dict[str, Any]] = None
    note, compare_md = "", ""
    # a downgrade the log alone does not prove fixable goes to `remedy run` too: it checks this machine's
    # own host (the brand string) and refuses what it cannot prove, so the Action never decides that itself
    if remedy and stock is not None and verdict == "capability-downgrade" and status == 0:
        print(f"capscan action: remedied run of {shlex.join(argv)}", flush=True)
        with CommandsStopped():
            remedied = cap.json("remedy", "run", "--json", "--family", family, "--run", str(int(stock["id"])),
                                "--", *argv)
        if remedied is None:
            remedied = {"refused": True, "reason": "capscan remedy run printed no result"}
        new = (remedied.get("compare") or {}).get("new_run_id")
        if new is not None:
            compare_md = cap.text("compare", str(int(stock["id"])), str(int(new)), "--markdown")
    elif remedy:
        note = (f"The remedy was not run: the stock run is {verdict}"
                + ("" if status == 0 else f", and the command exited with status {status}") + ".")
    failure = decide(verdict, fixable, remedied, remedy, fail_on, status)
    verified = bool(remedied and remedied.get("verified"))
    append(env.get("GITHUB_STEP_SUMMARY"),
           summary_lines(verdict, stock, remedied, note, compare_md, failure, status))
    write_outputs(env.get("GITHUB_OUTPUT"), {
        "verdict": verdict, "fixable": "true" if fixable else "false", "verified": "true" if verified else "false",
        "speedup": headline_speedup(speedups((remedied or {}).get("compare"))) if verified else ""})
    if failure:
        annotate("error", f"capscan: {verdict}", failure)
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
