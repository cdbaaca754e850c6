"""GitHub Actions: with GITHUB_ACTIONS=true, the markdown report goes to the
job summary ($GITHUB_STEP_SUMMARY) and each capability-downgrade (error) or
hardware-limit (warning) run becomes an annotation. --no-gha turns it off.

Annotations are workflow commands on stderr (the runner reads both streams;
stdout stays data). Their text comes partly from logs, which are hostile: it is
escaped by the workflow-command rules (% CR LF in the message; also : and , in
properties) and every other control character is dropped, so a log line can
neither end the command early nor start another one.

GitHub places an annotation on a file only when ``file=`` is a path in the
checked-out repository, relative to it: a run read from a pipe, a child or a
file outside $GITHUB_WORKSPACE gets a plain ``::error title=...::`` line, which
GitHub shows on the job instead of as a missing file (issue 42).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Callable

from analyzer.safe_text import unfiltered

ANNOTATE = {"capability-downgrade": "error", "hardware-limit": "warning"}
_CONTROL = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def active() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A workflow command's message: % first, then CR and LF; other controls dropped."""
    text = _CONTROL.sub("", str(text))
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (title=, file=): also : and ,."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(run) -> str | None:
    """The ::error/::warning line for a run, or None for verdicts that need none."""
    diag = run.diagnosis
    verdict = diag.verdict if diag else "unknown"
    level = ANNOTATE.get(verdict)
    if level is None:
        return None
    props = [f"title={escape_property(f'capscan: run {run.id} is {verdict}')}"]
    where = workspace_path(run.source)
    if where is not None:
        props.insert(0, f"file={escape_property(where)}")
        if run.facts.first_line:
            props.insert(1, f"line={int(run.facts.first_line)}")
    message = (diag and diag.summary) or verdict
    return f"::{level} {','.join(props)}::{escape_data(message)}"


def workspace_path(source: str | None) -> str | None:
    """``source`` relative to $GITHUB_WORKSPACE when it names a file inside it, else None (a pipe, a
    stored name such as "llama-bench · ...", a file elsewhere: GitHub could not open it)."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if not source or not workspace or source.startswith("<"):
        return None
    try:
        root = os.path.realpath(workspace)
        path = os.path.realpath(os.path.join(root, source))
        if not os.path.isfile(path) or os.path.commonpath([root, path]) != root:
            return None
    except (OSError, ValueError):  # a name that is no path (NUL), or on another drive
        return None
    return os.path.relpath(path, root).replace(os.sep, "/")


def report(runs: list, markdown: Callable[[], str]) -> None:
    """Under GitHub Actions: append the markdown report (``markdown()``, made only here: cli.output passes
    it, so this module never imports that one back) to the job summary and annotate."""
    if not active():
        return
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(markdown() + "\n")
        except OSError as exc:
            print(f"capscan: cannot write the job summary {summary}: {exc.strerror or exc}", file=sys.stderr)
    # capscan's own workflow commands, already escaped: past the output boundary, which defuses any other
    err = unfiltered(sys.stderr)
    for run in runs:
        line = annotation(run)
        if line:
            err.write(line + "\n")
            err.flush()
