"""The composite Action (action.yml) as GitHub's runner would run it, as far as Linux allows (issue 42):
each step read with PyYAML, its `if:` and `${{ inputs.* }}` evaluated, its shell run with the runner's
files (GITHUB_OUTPUT, GITHUB_ENV, GITHUB_STEP_SUMMARY) and GITHUB_WORKSPACE in a temp folder, with
`install: false` and capscan (this tree) on a PATH built here. The workload is the Linux stand-in:
fake-llama on the fake paravirtual device, remedied through the LD_PRELOAD library.

Steps that `uses:` another action (actions/setup-python) are not run: they need GitHub's runner and
the network, and are taken only with `install: true`; the test checks they are skipped for
`install: false` and that they are the only such steps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ARM64_BUILD_LINE, REPO, SHIM_VARS

ACTION = REPO / "action.yml"
STEP_EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


@dataclass
class Ran:
    code: int
    log: str
    outputs: dict[str, str]
    summary: str

    @property
    def commands(self) -> list[str]:
        """The workflow commands the runner would act on: the lines outside a ::stop-commands:: span."""
        out, stop = [], None
        for line in self.log.splitlines():
            if stop is not None:
                if line == f"::{stop}::":
                    stop = None
                continue
            if line.startswith("::stop-commands::"):
                stop = line.split("::")[2]
            elif line.startswith("::"):
                out.append(line)
        assert stop is None, "commands left stopped"
        return out

    @property
    def annotations(self) -> list[str]:
        return [c for c in self.commands if c.startswith(("::error", "::warning", "::notice"))]


def _expr(text: str, inputs: dict[str, str], steps: dict[str, dict[str, str]]) -> str:
    def value(m: re.Match) -> str:
        expr = m.group(1)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        if expr.startswith("steps."):
            _, sid, _, name = expr.split(".")
            return steps.get(sid, {}).get(name, "")
        raise AssertionError(f"an expression this test does not evaluate: {expr}")

    return STEP_EXPR.sub(value, text)


def _condition(cond: str | None, inputs: dict[str, str]) -> bool:
    if cond is None:
        return True
    m = re.fullmatch(r"inputs\.([\w-]+) == '([^']*)'", cond.strip())
    assert m, f"an if: this test does not evaluate: {cond}"
    return inputs[m.group(1)] == m.group(2)


def run_action(tmp: Path, command: str, env: dict[str, str] | None = None, **given: str) -> Ran:
    """Every step of action.yml, in order, as the runner runs a composite action's steps (``env``: the job's
    variables, which the workload inherits)."""
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs.update({"command": command, "install": "false", **{k.replace("_", "-"): v for k, v in given.items()}})
    bin_dir, work, temp = tmp / "bin", tmp / "workspace", tmp / "runner-temp"
    for d in (bin_dir, work, temp):
        d.mkdir(exist_ok=True)
    # capscan (this tree's) and a python3 on a PATH made here; /usr/bin:/bin for bash itself
    (bin_dir / "capscan").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m analyzer "$@"\n')
    (bin_dir / "capscan").chmod(0o755)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
    files = {name: tmp / f"{name.lower()}.txt" for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_STEP_SUMMARY")}
    for f in files.values():
        f.write_text("")
    base = {k: v for k, v in os.environ.items() if k not in SHIM_VARS and not k.startswith(("GITHUB_", "RUNNER_"))}
    base.update({"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "CAPSCAN_DB": str(tmp / "unused.db"),
                 "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(work), "GITHUB_ACTION_PATH": str(REPO),
                 "RUNNER_TEMP": str(temp), "NO_COLOR": "1", "CAPSCAN_FAKE_LLAMA_PREAMBLE": ARM64_BUILD_LINE.strip(),
                 **{k: str(v) for k, v in files.items()}, **(env or {})})
    steps: dict[str, dict[str, str]] = {}
    log, code = [], 0
    for step in action["runs"]["steps"]:
        if "uses" in step:
            # needs GitHub's runner and the network; taken only to install, which this test does not
            assert step["uses"].startswith("actions/setup-python@") and step["if"] == "inputs.install == 'true'"
            assert not _condition(step.get("if"), inputs)
            continue
        if not _condition(step.get("if"), inputs):
            continue
        assert step["shell"] == "bash" and "${{" not in step["run"], "user text must reach a script as a variable"
        env = {**base, **{k: _expr(str(v), inputs, steps) for k, v in (step.get("env") or {}).items()}}
        files["GITHUB_OUTPUT"].write_text("")
        script = tmp / "step.sh"
        script.write_text(step["run"])
        # GitHub's bash: `bash --noprofile --norc -eo pipefail {0}`
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=work, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=300)
        log.append(r.stdout.decode("utf-8", "replace"))
        if "id" in step:
            steps[step["id"]] = dict(line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines())
        if r.returncode:
            code = r.returncode
            break
    outputs = {name: _expr(spec["value"], inputs, steps) for name, spec in action["outputs"].items()}
    return Ran(code, "".join(log), outputs, files["GITHUB_STEP_SUMMARY"].read_text())


def test_action_declares_the_inputs_and_outputs_the_docs_name():
    action = yaml.safe_load(ACTION.read_text())
    assert set(action["inputs"]) == {"command", "remedy", "fail-on", "family", "install", "python-version",
                                     "capscan-version"}
    assert action["inputs"]["fail-on"]["default"] == "unremedied,unknown"
    assert action["inputs"]["install"]["default"] == "true" and action["inputs"]["remedy"]["default"] == "false"
    assert set(action["outputs"]) == {"verdict", "fixable", "verified", "speedup"}
    # never DYLD_* through $GITHUB_ENV: each step's SIP-protected /bin/bash drops it (docs/ci.md)
    assert "GITHUB_ENV" not in ACTION.read_text() and "DYLD_" not in ACTION.read_text()


def test_downgraded_and_remedied_ends_green_verified_with_a_speedup(tmp_path, linux_build):
    ran = run_action(tmp_path, f"{linux_build / 'fake-llama'} -m 'tiny model.gguf' -p 64 -n 16",
                     remedy="true", family="1007")
    assert ran.code == 0, ran.log
    assert ran.outputs == {"verdict": "capability-downgrade", "fixable": "true", "verified": "true",
                           "speedup": "16.36"}
    assert ran.annotations == []
    # both runs' output reached the log (the stock run through --tee, the remedied one through remedy run)
    assert "12.63 ± 0.05" in ran.log and "206.60 ± " in ran.log
    assert "[capscan-interposer] enabled for fake-llama (apple_family_max=1007" in ran.log
    s = ran.summary
    assert s.startswith("## capscan: capability-downgrade (remedied and verified) · passed\n")
    assert "The VM's paravirtual GPU reports Apple5" in s  # the verdict sentence
    assert "**Proof** (each from the guest's own lines):" in s and "- line 1: the guest is an arm64 macOS build" in s
    assert "- pass capability flags: simdgroup reduction, simdgroup matrix mul. and bfloat are now true" in s
    assert "| tg128 | 12.63 | 206.60 | 1635.8% |" in s and "| pp512 | 431.86 | 4,786.70 | 1108.4% |" in s
    assert "speed on hosted runners is noisy" in s
    assert re.search(r"tg128 +remedied +█{30} 206\.60 t/s", s) and "remedied / stock = 16.36x (derived)" in s
    assert "do not put them in upstream bug reports or compare them with bare metal" in s


def test_downgraded_without_remedy_ends_red_with_one_annotation_naming_the_fix(tmp_path, linux_build):
    ran = run_action(tmp_path, f"{linux_build / 'fake-llama'} --bench")
    assert ran.code == 1, ran.log
    assert ran.outputs == {"verdict": "capability-downgrade", "fixable": "true", "verified": "false", "speedup": ""}
    (note,) = ran.annotations
    # no file=: the input was a command's output, not a file in the workspace
    assert note.startswith("::error title=capscan%3A capability-downgrade::")
    assert "set `remedy: true` on this step" in note and "capscan remedy run" in note
    assert "[capscan-interposer]" not in ran.log  # nothing was injected
    assert "· failed" in ran.summary and "**Why the job fails:**" in ran.summary


def test_an_unverified_remedy_ends_red_naming_the_failed_check(tmp_path, linux_build):
    """The interposer rolls back on an incomplete device class: launched, not verified, red."""
    ran = run_action(tmp_path, f"{linux_build / 'fake-llama'} --bench", remedy="true", family="1007",
                     env={"CAPSCAN_FAKE_METAL_DEVICE": "incomplete", "CAPSCAN_METAL_MAX_THREADGROUP_MEMORY": "65536"})
    assert ran.code == 1, ran.log
    assert ran.outputs["verdict"] == "capability-downgrade" and ran.outputs["verified"] == "false"
    assert ran.outputs["speedup"] == ""
    (note,) = ran.annotations
    assert note.startswith("::error title=capscan%3A capability-downgrade::the remedy ran but was not verified "
                           "(banner failed: the interposer loaded but did not apply"), note
    assert "- fail banner:" in ran.summary


def test_unknown_ends_red_under_the_default_policy_and_log_text_commands_nothing(tmp_path):
    # a llama-bench that stopped before its Metal block; its output tries to issue workflow commands
    script = "print('main: loading model'); print('::error title=owned::x'); print('::add-mask::secret')"
    ran = run_action(tmp_path, f"python3 -c \"{script}\"", remedy="true")
    assert ran.code == 1, ran.log
    assert ran.outputs == {"verdict": "unknown", "fixable": "false", "verified": "false", "speedup": ""}
    assert "::error title=owned::x" in ran.log  # shown in the log, as text
    (note,) = ran.annotations  # ... but inside a stop-commands span: the runner acts on capscan's alone
    assert note.startswith("::error title=capscan%3A unknown::capscan found no capability lines")
    assert "The remedy was not run: the stock run is unknown." in ran.summary
    # the same run passes when the policy is widened on purpose
    (tmp_path / "again").mkdir()
    again = run_action(tmp_path / "again", f"python3 -c \"{script}\"", fail_on="none")
    assert again.code == 0 and again.annotations == []


def test_healthy_ends_green_and_is_not_remedied(tmp_path, linux_build):
    ran = run_action(tmp_path, f"{linux_build / 'fake-llama'} --bench", remedy="true",
                     env={"CAPSCAN_FAKE_METAL_DEVICE": "m1-ultra"})
    assert ran.code == 0, ran.log
    assert ran.outputs["verdict"] == "healthy" and ran.outputs["verified"] == "false"
    assert ran.annotations == []
    assert "[capscan-interposer]" not in ran.log
    assert "The remedy was not run: the stock run is healthy." in ran.summary
    assert "upstream bug reports" not in ran.summary  # a bare-metal run: the VM note does not apply


def test_a_command_that_prints_nothing_is_unknown_and_red(tmp_path):
    ran = run_action(tmp_path, "python3 -c pass")
    assert ran.code == 1, ran.log
    assert ran.outputs["verdict"] == "unknown"
    (note,) = ran.annotations
    assert note.startswith("::error title=capscan%3A unknown::capscan found no capability lines"), note
    assert ran.summary.startswith("## capscan: unknown · failed\n") and "found nothing it reads" in ran.summary


def test_without_capscan_on_path_install_false_is_one_line_and_exit_2(tmp_path):
    ran = run_action(tmp_path, "llama-bench -m m.gguf", env={"CAPSCAN_ACTION_CAPSCAN": "no-such-capscan"})
    assert ran.code == 2 and "Traceback" not in ran.log, ran.log
    (note,) = ran.annotations
    assert note == "::error title=capscan%3A bad input::capscan is not on PATH (with install: false, install it " \
                   "in an earlier step)"


def test_a_command_that_fails_ends_red_whatever_its_verdict(tmp_path, linux_build):
    ran = run_action(tmp_path, f"{linux_build / 'fake-llama'} --no-such-flag", fail_on="none")
    assert ran.code == 1, ran.log
    (note,) = ran.annotations
    assert note.startswith("::error title=capscan%3A unknown::the command exited with status 2"), note


@pytest.mark.parametrize("given,message", [
    ({"command": "llama-bench -m 'unclosed"}, "command: cannot split it into words"),
    ({"command": "   "}, "command: nothing to run"),
    ({"command": "llama-bench", "fail_on": "capability-downgrad"}, "fail-on: unknown value 'capability-downgrad'"),
    ({"command": "/nonexistent/llama-bench -m m.gguf"}, "command: cannot start '/nonexistent/llama-bench'"),
])
def test_bad_input_is_one_annotation_and_exit_2(tmp_path, given, message):
    command = given.pop("command")
    ran = run_action(tmp_path, command, **given)
    assert ran.code == 2, ran.log
    (note,) = ran.annotations
    assert note.startswith("::error title=capscan%3A bad input::" + message), note
    assert "Traceback" not in ran.log


def test_actionlint_checks_action_yml_through_the_workflow_that_uses_it(tmp_path):
    """`make lint`'s actionlint (the lint extra puts it beside the interpreter): clean on the workflows, and
    really reading action.yml through `uses: ./` (a misspelt input fails it)."""
    actionlint = Path(sys.executable).parent / "actionlint"
    if not actionlint.exists():
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail("actionlint missing (scripts/install-test-deps installs the lint extra)")
        pytest.skip("actionlint not installed (the lint extra)")
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)  # actionlint finds the project, and so `uses: ./`, by it
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "examples" / "ci").mkdir(parents=True)
    (root / "action.yml").write_text(ACTION.read_text())
    workflows = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted((REPO / "examples" / "ci").glob("*.yml"))
    for w in workflows:
        (root / w.relative_to(REPO)).write_text(w.read_text())
    names = [str(w.relative_to(REPO)) for w in workflows]
    clean = subprocess.run([str(actionlint), "-no-color", *names], cwd=root, capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    real = root / ".github" / "workflows" / "action-on-a-real-runner.yml"
    real.write_text(real.read_text().replace("          remedy: true", "          remdy: true"))
    bad = subprocess.run([str(actionlint), "-no-color", *names], cwd=root, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and 'input "remdy" is not defined in action "capscan"' in bad.stdout, bad.stdout
