"""What `capscan remedy` would do for a stored run, on this machine, without
doing it: the steps (each with its command and the check behind it), or why
nothing should be done. Read-only: it never writes to the database (the TUI
calls build_plan from a worker thread).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from analyzer import chips
from analyzer.parsers.system import program_of_argv
from analyzer.remedy import dylib as dylibmod
from analyzer.remedy import platform as plat
from analyzer.remedy import transport
from analyzer.remedy.prefix import injection_vars
from analyzer.remedy.preflight import CHILD_GPU_PROGRAMS
from analyzer.remedy.runner import Runner, file_arg

if TYPE_CHECKING:
    from analyzer.diagnosis import Diagnosis
    from analyzer.store.db import Database

REFUSALS = {
    "hardware-limit": "This GPU really lacks the features llama.cpp's fast Metal kernels need, so this is a hardware "
                      "limit: do not force capabilities, because claiming families the GPU does not have makes "
                      "llama.cpp run kernels it cannot execute correctly.",
    "no-gpu-offload": "The GPU is not used at all, so there is no capability to restore: make the GPU visible first "
                      "(a build with your GPU's backend: Metal on a Mac, CUDA, ROCm or Vulkan elsewhere; -ngl 99), "
                      "then diagnose again.",
    "virtualization-overhead": "Capabilities are already complete; the remaining gap to bare metal is the virtual "
                               "GPU's own per-dispatch cost, which no capability change removes.",
    "healthy": "Full capabilities already: nothing to fix.",
    "unknown": "There is not enough evidence in this run to act on, and capscan never injects on a guess: pipe the "
               "full stderr (2>&1) or run `capscan probe`, then plan again.",
}


def load_diagnosis(db: Database, run_id: int) -> tuple[Any, Diagnosis | None]:
    """The run and its diagnosis, decided again in memory from its stored facts with today's rules (nothing
    written): the stored one is a claim, and a plan acts on it."""
    from analyzer.pipeline import decide_run
    from analyzer.store.queries import load_run

    run = load_run(db, run_id)
    if run is None:
        return None, None
    run.diagnosis = diag = decide_run(db, run, keep_settled=False)
    return run, diag


def live_host_proof(runner: Runner | None) -> dict[str, Any] | None:
    """This machine's own proof that it runs on Apple silicon, read live (macOS only): a CPU brand string
    naming an Apple chip ('Apple M1 Ultra (Virtual)' in a guest), or arm64 macOS itself, which runs only on
    Apple-silicon hosts. None without a runner, off macOS, or when neither shows."""
    if runner is None or plat.system() != "darwin":
        return None
    brand = plat.brand_string(runner)
    chip = chips.apple_chip(brand)
    if chip and not chips.is_intel_cpu(brand):
        return {"sign": f"this machine's CPU brand string names its host chip, {chip}", "line": None,
                "text": f"{' '.join(plat.BRAND_ARGV)}: {brand}"}
    if plat.machine() == "arm64" and not (brand and chips.is_intel_cpu(brand)):
        return {"sign": "this machine runs arm64 macOS, which runs only on Apple-silicon hosts", "line": None,
                "text": "uname -m: arm64"}
    return None


def refusal_for(run: Any, diag: Diagnosis, runner: Runner | None = None) -> str | None:
    """None when the run is a fixable capability-downgrade; else why nothing should be done. With a
    ``runner``, a downgrade whose log lacks only the host's proof (``proof_missing == ['host']``) is checked
    on the live machine instead (``live_host_proof``): the remedy runs here, so this machine's host counts."""
    verdict = diag.verdict
    if run is not None and run.origin is not None:  # a report from elsewhere: whoever wrote it, it never acts here
        where = run.origin.get("instance") or "the machine it came from"
        return (f"This run was imported from {where}: this store holds its report, not its log, so capscan offers "
                f"no remedy for it here. The remedy runs where the workload runs: `capscan remedy plan` on {where}.")
    shim = run.facts.shim if run is not None else None
    live = None
    if verdict == "capability-downgrade" and not diag.fixable and diag.proof_missing == ["host"]:
        live = live_host_proof(runner)
    if verdict == "capability-downgrade" and (diag.fixable or live):
        if shim is not None:
            return (f"This run already shows the {shim.name} banner, so it is not a stock run; capscan never "
                    "injects twice.")
        return None
    if verdict == "capability-downgrade":
        why = diag.fixable_reason or "the host is not known to be Apple silicon"
        if "intel" in why.lower():
            return (f"Not fixable: {why}, so the GPU family reported is the real one: do not force capabilities "
                    "on an Intel-hosted VM.")
        return (f"Not marked fixable: {why}. capscan only injects on positive evidence of an Apple-silicon host, "
                "because forcing families on other hardware would claim features it lacks.")
    if verdict == "healthy" and shim is not None:
        return f"Already remedied ({shim.name}, apple_family_max={shim.apple_family_max}): nothing to fix."
    # the report's advice for this cause (0 layers asked for, a CPU-only build, whisper's -ng...), not a generic one
    advice = next((s for s in diag.next_steps if "capscan remedy" not in s), None) if verdict == "no-gpu-offload" else None
    if advice:
        return f"The GPU is not used at all, so there is no capability to restore. {advice} Then diagnose again."
    return REFUSALS.get(verdict, REFUSALS["unknown"])


# program names a log gives that are also the names of the programs themselves
REAL_PROGRAMS = frozenset({"llama-bench", "llama-cli", "llama-server", "llama-completion", "main", "server",
                           "whisper-cli", "ollama", "koboldcpp"})

# since 2026-05 these hide the Metal capability block below -lv 4, so a remedied run could not be verified
_QUIET_BY_DEFAULT = frozenset({"llama-server", "llama-cli", "llama-completion"})
_VERBOSE_FLAGS = ("-v", "--verbose", "-lv", "--log-verbosity", "-lv4")


def command_program(cmd: list[str] | None) -> str | None:
    """The program a command runs, the 2026 unified binary's subcommands included: `llama serve -m m.gguf`
    is llama-server, `llama bench ...` llama-bench, as their own binaries are."""
    return program_of_argv(list(cmd)) if cmd else None


def verbosity_note(cmd: list[str] | None) -> str | None:
    """What to add to a llama-server/llama-cli command (either form) so its capability block prints."""
    program = command_program(cmd)
    if program not in _QUIET_BY_DEFAULT or any(a.split("=", 1)[0] in _VERBOSE_FLAGS for a in cmd or ()):
        return None
    return (f"{program} prints the Metal capability block only at -lv 4 (since 2026-05): add `-lv 4` to the command, "
            "or capscan cannot verify the remedy from its output.")


def _step(title: str, argv: list[str], check: str) -> dict[str, Any]:
    argv = [str(a) for a in argv]
    return {"title": title, "argv": argv, "shell": shlex.join(argv), "check": check}


def plan_family(diag: Diagnosis, runner: Runner | None) -> tuple[str, str]:
    """('1007' or 'auto', where it comes from), without failing."""
    fam = diag.host_family
    if fam:
        return str(fam), f"{chips.family_name(fam)}, the true family of {diag.host_chip}"
    if runner is not None and plat.system() == "darwin":
        brand = plat.brand_string(runner)
        bf = chips.chip_family(brand) if brand else None
        if bf:
            return str(bf), f"{chips.family_name(bf)}, from this guest's CPU ({brand})"
    # The host chip is unknown here, so `--family auto` would fail preflight; Apple7 is what the report
    # suggests too: the lowest family of any Apple-silicon host, and all llama.cpp needs.
    return str(chips.APPLE7), (f"{chips.family_name(chips.APPLE7)}: the host chip is not in the log, and Apple7 is "
                               "the lowest family of any Apple-silicon host and all llama.cpp needs (pass the "
                               "host's own with --family N: M1 1007, M2 1008, M3/M4 1009)")


def build_plan(db: Database, run_id: int, *, command: list[str] | None = None,
               runner: Runner | None = None, stand_in: bool = False) -> dict[str, Any]:
    """The plan for a run. Off macOS it is the macOS guest's (the commands to run there, and the --via forms
    that run them from the host), since only the guest can remedy its run; ``stand_in`` plans this Linux
    machine's LD_PRELOAD stand-in instead, which proves the injection path on the fake Metal device (developers)."""
    run, diag = load_diagnosis(db, run_id)
    if run is None or diag is None:  # (a loaded run always has a diagnosis: stored or computed)
        return {"run_id": run_id, "verdict": None, "actionable": False, "refusal": f"There is no run {run_id}.",
                "steps": []}
    verdict = diag.verdict
    refusal = refusal_for(run, diag, runner)
    base = {"run_id": run_id, "verdict": verdict, "fixable": diag.fixable,
            "fixable_reason": diag.fixable_reason, "host_chip": diag.host_chip}
    if refusal:
        return {**base, "actionable": False, "refusal": refusal, "steps": []}

    system = plat.system()
    in_guest = system != "darwin" and not stand_in  # the guest's commands, read here: nothing of this machine
    inj = plat.injection("darwin" if in_guest else system)
    # the log names a program, not its command line: an explicit placeholder, never a label such as
    # 'llama.cpp' that would be refused when pasted; the checks read the program itself where it is found
    program = command_program(command) or run.facts.program or "llama.cpp"
    cmd = list(command) if command else [f"<your {program} command>"]
    exe = cmd[0] if command else (program if program in REAL_PROGRAMS else f"<path of your {program}>")
    family, family_why = plan_family(diag, runner)
    steps: list[dict[str, Any]] = []
    notes: list[str] = []
    if inj is None:
        return {**base, "actionable": False, "steps": [],
                "refusal": f"This machine ({system}) has no stand-in: the Linux stand-in needs Linux; without "
                           "--stand-in the plan is the macOS guest's."}
    lib_dir = dylibmod.build_dir(inj)
    if in_guest:
        # where the guest's capscan keeps its library is the guest's to say; remedy run checks it there
        library, library_why = (f"<{dylibmod.MAC_NAME} from capscan in the guest>",
                                "the library the guest's capscan ships (or its macos-native build)")
    else:
        chosen = dylibmod.choose(inj)
        library, library_why = str(chosen.path), chosen.why
    if in_guest or system == "darwin":
        # a program name from the log may start with '-': never let a tool read it as an option
        exe_path = file_arg((runner.which(exe) if runner and not in_guest else None) or exe)
        steps += [
            _step("Confirm this is a guest", plat.HV_ARGV,
                  "1 in a VM, 0 on bare metal (where there is nothing to fix); older macOS without it: the brand "
                  "string's '(Virtual)'."),
            _step("Read the host chip", plat.BRAND_ARGV,
                  "The chip it names sets the family cap, never above the host's true "
                  f"family ({family_why})."),
            _step("Check SIP", ["csrutil", "status"],
                  "Every published shim result had SIP disabled; with SIP enabled, dyld strips DYLD_* variables for "
                  "protected programs."),
            _step("Check the program's location and flags", ["ls", "-lO", exe_path],
                  "Follows symlinks and #! scripts to the binary that really starts; refuses /System, /usr (not "
                  "/usr/local), /bin, /sbin, the 'restricted' flag and setuid/setgid, where dyld drops the variable."),
            _step("Check hardened runtime", ["codesign", "-dv", "--verbose=4", exe_path],
                  "capscan reads the signature in-process (codesign is an optional cross-check): flags=0x10000 "
                  "(runtime) without allow-dyld-environment-variables, or the restrict flag 0x800, makes dyld drop "
                  "the variable."),
            _step("Check entitlements", ["codesign", "-d", "--entitlements", "-", exe_path],
                  "A hardened program needs allow-dyld-environment-variables and disable-library-validation, or "
                  "library validation refuses the ad-hoc-signed interposer (read in-process too)."),
            _step("Check for a __RESTRICT segment", ["otool", "-l", exe_path],
                  "A __RESTRICT,__restrict section makes dyld ignore DYLD_* variables (read in-process; otool "
                  "only with the Command Line Tools)."),
            _step("Check every binary of the launch chain", ["lipo", "-archs", exe_path],
                  "The program, its #! interpreters, /usr/bin/env and what env runs, each read in-process: every "
                  "one must find its slice in the library (with SIP off an arm64e one, Apple's, may refuse even an "
                  "arm64e slice unless kern.bootargs holds -arm64e_preview_abi: reports differ)."),
            _step("Verify the interposer", ["shasum", "-a", "256", str(library)],
                  f"capscan injects {library_why}. Owned by you or root, not group- or world-writable, matching "
                  "the SHA256SUMS beside it."),
        ]
    else:
        steps += [
            _step("Build the Linux stand-in if missing", ["make", "-C", str(dylibmod.native_dir()), inj.make_target],
                  "Linux has no Metal: the LD_PRELOAD stand-in hooks the fake Metal device, which proves the "
                  "injection path and capscan's verification, not a real GPU."),
            _step("Verify the stand-in", ["sha256sum", str(lib_dir / dylibmod.LINUX_NAME)],
                  "Must be owned by you or root, not group- or world-writable, and match the SHA256SUMS written "
                  "beside it at build."),
        ]
        notes.append("On Linux only the fake Metal device can be remedied; run this in the macOS guest for real.")
    # ollama's GPU work runs in its runner child, which the default scrub would leave without the library
    children = program in CHILD_GPU_PROGRAMS
    # the guest's own store does not hold this store's run ids: there, remedy run takes its newest stock run
    run_ref = [] if in_guest else ["--run", str(run_id)]
    remedy_argv = ["capscan", "remedy", "run", *run_ref, "--family", family,
                   *(["--inject-children"] if children else []), "--", *cmd]
    pairs = injection_vars(inj, str(library), 0, inject_children=children)
    pairs[plat.FAMILY_VAR] = family if family != "auto" else "N"
    manual = ["/usr/bin/env", *(f"{k}={v}" for k, v in pairs.items()), *cmd]
    steps.append(_step("Launch with the interposer, store and verify", remedy_argv,
                       f"Only the child's environment changes ({inj.env_var} and {plat.FAMILY_VAR}={family}: "
                       f"{family_why}). Verified from the new log: the [capscan-interposer] banner, the family, and "
                       "simdgroup reduction / matrix mul. / bfloat now true; before/after and the speedup are "
                       f"printed. By hand{' (N: the host family)' if family == 'auto' else ''}: {shlex.join(manual)}"))
    if in_guest:
        notes.append("In the guest, `remedy run` compares with the newest stock run capscan stored there: pipe the "
                     "stock run into it first (CMD 2>&1 | capscan).")
    # the same launch from the host, through each VM tool (every option is forwarded to the guest's capscan)
    via_argv = {name: [*remedy_argv[:3], "--via", name, "--vm", "<VM name>", *remedy_argv[3:]]
                for name in transport.VIAS}
    quiet = verbosity_note(command)
    if quiet:
        notes.append(quiet)
    notes.append("The host default ForceUnrestrictedDeviceFeatureLevel is not needed: published tests found the "
                 "interposer alone sufficient (see `capscan remedy host-default --status` on the host).")
    return {**base, "actionable": True, "refusal": None, "family": family, "platform": system,
            "where": "guest" if in_guest else "stand-in" if system != "darwin" else "here",
            "injection": inj.env_var, "steps": steps, "notes": notes,
            "via": [{"via": name, "argv": argv, "shell": shlex.join(argv)} for name, argv in via_argv.items()]}
