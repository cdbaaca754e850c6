"""Preflight: every reason dyld (or ld.so) would drop or refuse the injection,
predicted before launching. Each check is a small function returning a Check:
pass/fail, one sentence of why, and what to do instead.

Mach-O facts (architectures, the __RESTRICT section, code-signature flags and
entitlements) are read in-process (analyzer.remedy.macho), so preflight works
without the Command Line Tools; `lipo`, `otool` and `codesign` are optional
cross-checks, run only when `xcode-select -p` says the tools are installed
(otherwise they are xcrun shims that fail or open an install dialog). The
tools (csrutil, sysctl, and the cross-checks) are reached through the Runner
only; file facts (symlinks, shebangs, setuid, the `restricted` flag) are read
directly.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from analyzer.remedy import macho
from analyzer.remedy import platform as plat
from analyzer.remedy.check import Check, failed, passed, skipped, warned
from analyzer.remedy.platform import (
    ALIAS_FAMILY_VARS,
    TART_DYLIB,
    Injection,
    all_injection_vars,
)
from analyzer.remedy.runner import Runner, file_arg

if TYPE_CHECKING:
    from analyzer.diagnosis import Diagnosis

SF_RESTRICTED = 0x80000
PROTECTED_PREFIXES = ("/System/", "/usr/", "/bin/", "/sbin/", "/private/var/db/")
UNPROTECTED_PREFIXES = ("/usr/local/",)
CS_RUNTIME, CS_RESTRICT, CS_LIBRARY_VALIDATION = 0x10000, 0x800, 0x2000
ALLOW_DYLD = "com.apple.security.cs.allow-dyld-environment-variables"
DISABLE_LV = "com.apple.security.cs.disable-library-validation"
SIP_ARGV = ["csrutil", "status"]


# --------------------------------------------------------------------------- platform


def check_platform(inj: Injection | None, system: str, machine: str, brand: str | None) -> Check:
    if inj is None:
        return failed("platform", f"{system} has no Metal and no capscan interposer",
                      "run capscan remedy inside the macOS guest, or from the host with --via")
    if system == "linux":
        return passed("platform", "Linux: the LD_PRELOAD stand-in with the fake Metal device (tests only; a real "
                      "guest is macOS)")
    if brand and "intel" in brand.lower():
        return failed("platform", f"this Mac's CPU is {brand}: an Intel host has no Apple GPU family to restore, so "
                      "this is a hardware limit and forcing capabilities would be wrong",
                      "run on an Apple-silicon Mac (or a guest on one); do not force capabilities here")
    if machine not in ("arm64", "arm64e") and not (brand and brand.lower().startswith("apple")):
        return failed("platform", f"this is a {machine} Mac, not Apple silicon, so there is no Apple GPU family "
                      "to restore", "do not force capabilities on this hardware")
    return passed("platform", f"macOS on Apple silicon ({brand or machine})")


def check_guest(system: str, guest: bool | None, how: str, brand: str | None = None) -> Check:
    """guest/how from platform.is_guest: kern.hv_vmm_present first, the brand string as fallback."""
    if system != "darwin":
        return skipped("guest", "not macOS")
    if guest is None:
        return warned("guest", "could not read kern.hv_vmm_present or the CPU brand string, so capscan cannot tell "
                      "guest from host", "check `sysctl -n kern.hv_vmm_present` prints 1 in the guest")
    if not guest:
        return failed("guest", f"this is not a VM guest ({how}): a bare-metal Mac already reports its real "
                      "GPU family, so there is nothing to inject",
                      "run this inside the guest, or from this host with --via lume|tart|anka|ssh --vm NAME")
    return passed("guest", f"a macOS guest ({how}{', ' + brand if brand and brand not in how else ''})")


def sip_state(runner: Runner) -> tuple[str, str]:
    """('enabled'|'disabled'|'custom'|'unknown', the line read).

    'custom' covers both "enabled (Custom Configuration)" and "unknown (Custom
    Configuration)" (what csrutil prints when the configuration was changed from
    Recovery piecemeal)."""
    result = runner.run(SIP_ARGV)
    text = result.output.strip()
    m = re.search(r"System Integrity Protection status:\s*(enabled|disabled|unknown)\s*(\(Custom Configuration\))?",
                  text)
    if not m:
        return "unknown", text.splitlines()[0] if text else "no output"
    if m.group(2):
        return "custom", m.group(0)
    return m.group(1), m.group(0)


def check_sip(system: str, state: str, line: str) -> Check:
    if system != "darwin":
        return skipped("SIP", "Linux has no System Integrity Protection", command=SIP_ARGV)
    if state == "disabled":
        return passed("SIP", "disabled in this guest, the state every published shim result used", command=SIP_ARGV)
    if state == "custom":
        return warned("SIP", f"a custom configuration ({line.strip()}): capscan cannot tell whether dyld strips "
                      "DYLD_* variables, so it assumes the worst both ways (protected programs drop the variable, "
                      "and Apple's arm64e programs load the library, which needs an arm64e slice)",
                      "disable SIP fully in the guest's Recovery (`csrutil disable`), the state every published "
                      "shim result used", command=SIP_ARGV)
    if state == "enabled":
        return warned("SIP", f"enabled ({line.strip()}): dyld strips DYLD_* variables for SIP-protected programs, "
                      "and no published result confirms the shim with SIP on",
                      "if the banner does not appear, disable SIP in the guest's Recovery (Lume: `lume sip`; "
                      "Tart/Anka images usually ship with it off)", command=SIP_ARGV)
    return warned("SIP", f"could not read `csrutil status` ({line})", "run `csrutil status` in the guest",
                  command=SIP_ARGV)


# --------------------------------------------------------------------------- the real executable


@dataclass
class Target:
    given: str
    path: Path | None = None                       # what the kernel execs first
    chain: list[Path] = field(default_factory=list)  # every program exec'd on the way (interpreters included)
    script: Path | None = None

    @property
    def real(self) -> Path | None:
        """The binary that finally runs the workload (last interpreter, or the program)."""
        return self.chain[-1] if self.chain else self.path


def _which(name: str, env: Mapping[str, str]) -> str | None:
    import shutil

    return shutil.which(name, path=env.get("PATH", os.defpath))


def _shebang(path: Path) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split() or None


def resolve_target(argv0: str, env: Mapping[str, str]) -> tuple[Target, Check]:
    t = Target(argv0)
    found = argv0 if "/" in argv0 else _which(argv0, env)
    if not found or not os.path.exists(found):
        return t, failed("executable", f"{argv0!r} was not found (PATH searched)",
                         "give the full path of the program to run")
    real = Path(os.path.realpath(found))
    t.path = real
    t.chain = [real]
    notes = [f"{found} -> {real}"] if str(real) != os.path.abspath(found) else [str(real)]
    current = real
    for _ in range(4):  # interpreters of interpreters are rare; bound the walk
        sb = _shebang(current)
        if not sb:
            break
        t.script = t.script or current
        interp = sb[0]
        rest = sb[1:]
        interp_real = Path(os.path.realpath(interp))
        t.chain.append(interp_real)
        notes.append(f"#! {' '.join(sb)}")
        if interp_real.name == "env":
            args = [a for a in rest if not a.startswith("-") and "=" not in a]
            if not args:
                break
            nxt = args[0] if "/" in args[0] else _which(args[0], env)
            if not nxt:
                break
            nxt_real = Path(os.path.realpath(nxt))
            t.chain.append(nxt_real)
            notes.append(f"env -> {nxt_real}")
            current = nxt_real
        else:
            current = interp_real
    if not os.access(t.chain[-1], os.X_OK):
        return t, failed("executable", f"{t.chain[-1]} is not executable", "give the path of the program binary")
    return t, passed("executable", "; ".join(notes), data={"chain": [str(p) for p in t.chain]})


def is_protected(path: Path) -> bool:
    p = str(path)
    if p.startswith(UNPROTECTED_PREFIXES):
        return False
    if p.startswith(PROTECTED_PREFIXES):
        return True
    try:
        return bool(getattr(os.stat(path), "st_flags", 0) & SF_RESTRICTED)
    except OSError:
        return False


def check_protected(system: str, target: Target, sip: str) -> Check:
    if system != "darwin":
        return skipped("protected location", "Linux has no SIP-protected locations")
    hits = [p for p in target.chain if is_protected(p)]
    if not hits:
        return passed("protected location", "nothing on the launch path is SIP-protected")
    if sip == "disabled":
        return passed("protected location", f"{hits[0]} is a SIP-protected location, but SIP is disabled here")
    first = hits[0]
    if target.script is not None:
        final = target.chain[-1]
        instead = (f"run the program directly, e.g. capscan remedy run -- {final} {target.script} ..."
                   if not is_protected(final) else
                   "use an interpreter outside /usr and /System (e.g. Homebrew's) and run it directly")
        return failed("protected location", f"{target.script} starts through {first}, which is SIP-protected, so dyld "
                      "purges DYLD_INSERT_LIBRARIES before the workload runs", instead)
    return failed("protected location", f"{first} is SIP-protected, so dyld ignores DYLD_INSERT_LIBRARIES for it",
                  "use a copy or build outside /System, /usr, /bin and /sbin (e.g. /usr/local or Homebrew), "
                  "or disable SIP in the guest")


OLLAMA_APP = "/Ollama.app/Contents/"


def check_ollama_app(target: Target) -> Check | None:
    """The official Ollama.app (its `ollama` CLI is a link into the bundle): signed with the hardened runtime,
    so dyld drops the variable for it and its runner. Said by name, before any signature is read."""
    for p in (*target.chain, str(target.real or "")):
        if OLLAMA_APP in str(p):
            return failed("official Ollama.app", f"{p} is the official Ollama.app, signed with the hardened "
                          "runtime: dyld drops the injection for it and for its runner",
                          "run an ollama from Homebrew or built yourself (`--inject-children -- "
                          "\"$(brew --prefix)/bin/ollama\" serve`), or llama-server from Homebrew or source")
    return None


def check_setid(target: Target) -> Check:
    for p in target.chain:
        try:
            mode = os.stat(p).st_mode
        except OSError:
            continue
        if mode & (stat.S_ISUID | stat.S_ISGID):
            which = "setuid" if mode & stat.S_ISUID else "setgid"
            return failed("setuid/setgid", f"{p} is {which}, and the loader drops injection variables for such "
                          "programs", "run a copy without the setuid/setgid bit (chmod u-s,g-s COPY)")
    return passed("setuid/setgid", "no setuid or setgid program on the launch path")


# --------------------------------------------------------------------------- code signature


def parse_codesign_flags(text: str) -> tuple[int | None, bool]:
    """(flags, signed) from `codesign -dv --verbose=4` output."""
    if "not signed at all" in text:
        return 0, False
    m = re.search(r"flags=0x([0-9a-fA-F]+)", text)
    return (int(m.group(1), 16) if m else None), True


def entitlement(text: str, key: str) -> bool:
    """True when the entitlement is present and true (plist XML or codesign's [Dict] form)."""
    i = text.find(key)
    if i < 0:
        return False
    after = text[i + len(key):i + len(key) + 200].lower()
    m = re.search(r"<true\s*/>|<false\s*/>|\[bool\]\s*(true|false)", after)
    if not m:
        return False
    return "true" in m.group(0)


def read_macho(path: Path) -> tuple[macho.MachO | None, str | None]:
    try:
        return macho.read(path), None
    except macho.MachOError as exc:
        return None, str(exc)


def _no_tools(name: str, exe: Path, why: str, argv: list[str]) -> Check:
    return warned(name, f"{exe.name} could not be read in-process ({why}) and the Command Line Tools are not "
                  "installed, so this was not checked", "install them (xcode-select --install) or point capscan at "
                  "the program binary itself", command=argv)


def _signature_verdict(exe: Path, flags: int, allow: bool, no_lv: bool, how: str, argv: list[str]) -> Check:
    data = {"flags": flags, "allow_dyld_environment_variables": allow, "disable_library_validation": no_lv,
            "read": how}
    if flags & CS_RESTRICT:
        return failed("hardened runtime", f"{exe.name} is signed with the restrict flag (0x800), so dyld ignores "
                      "DYLD_* variables", "use a build of the program that is not restricted", command=argv,
                      data=data)
    if not flags & (CS_RUNTIME | CS_LIBRARY_VALIDATION):
        return passed("hardened runtime", f"signed without hardened runtime (flags=0x{flags:x}; {how})",
                      command=argv, data=data)
    if flags & CS_RUNTIME and not allow:
        return failed("hardened runtime", f"{exe.name} has the hardened runtime (flags=0x{flags:x}) without "
                      "allow-dyld-environment-variables, so dyld drops DYLD_INSERT_LIBRARIES",
                      "use a build without hardened runtime (build llama.cpp yourself), or an ad-hoc re-signed "
                      "copy: cp PROGRAM COPY && codesign --force --sign - COPY", command=argv, data=data)
    if not no_lv:
        return failed("library validation", f"{exe.name} enforces library validation, which refuses capscan's "
                      "ad-hoc-signed library (it is not signed with the program's team ID)",
                      "use a build without hardened runtime, or an ad-hoc re-signed copy "
                      "(codesign --force --sign - COPY)", command=argv, data=data)
    return passed("hardened runtime", "hardened, but entitled to allow-dyld-environment-variables and "
                  f"disable-library-validation ({how})", command=argv, data=data)


def _codesign_tool(runner: Runner, exe: Path) -> tuple[int | None, bool, str, list[str]]:
    """(flags, signed, entitlements text, argv) from codesign (a cross-check, or the fallback)."""
    argv = ["codesign", "-dv", "--verbose=4", file_arg(str(exe))]
    flags, signed = parse_codesign_flags(runner.run(argv).output)
    ents = ""
    if signed and flags is not None and flags & (CS_RUNTIME | CS_LIBRARY_VALIDATION):
        argv = ["codesign", "-d", "--entitlements", "-", file_arg(str(exe))]
        ents = runner.run(argv).output
    return flags, signed, ents, argv


def check_codesign(system: str, runner: Runner, exe: Path, tools: bool = True) -> Check:
    argv = ["codesign", "-dv", "--verbose=4", file_arg(str(exe))]
    if system != "darwin":
        return skipped("hardened runtime", "Linux: no code signatures", command=argv)
    info, why = read_macho(exe)
    if info is not None:
        sl = info.running_slice()
        if sl.signature_error:
            return warned("hardened runtime", f"the {sl.arch} slice's code signature could not be read "
                          f"({sl.signature_error})", "check it: codesign -dv --verbose=4 " + str(exe))
        if sl.signature is None:
            check = passed("hardened runtime", f"{exe.name} ({sl.arch}) is not signed, so dyld honours the variable",
                           data={"read": "in-process"})
            cross_flags = None
        else:
            sig = sl.signature
            check = _signature_verdict(exe, sig.flags, sig.entitled(ALLOW_DYLD), sig.entitled(DISABLE_LV),
                                       f"{sl.arch} slice, read in-process", [])
            cross_flags = sig.flags
        if tools:
            flags, signed, _ents, used = _codesign_tool(runner, exe)
            if flags is not None and signed and cross_flags is not None and flags != cross_flags:
                check.data["cross_check"] = f"codesign says flags=0x{flags:x}"
                check.reason += f" (codesign says flags=0x{flags:x}; the in-process reading decides)"
            check.command = used
        return check
    if not tools:
        return _no_tools("hardened runtime", exe, why or "", argv)
    result = runner.run(argv)
    if not result.found:
        return warned("hardened runtime", "codesign is not available, so the signature could not be checked",
                      "install the Command Line Tools (xcode-select --install)", command=argv)
    flags, signed = parse_codesign_flags(result.output)
    if not signed:
        return passed("hardened runtime", f"{exe.name} is not signed, so dyld honours the variable", command=argv)
    if flags is None:
        return warned("hardened runtime", f"could not read the signature flags of {exe}", command=argv)
    if not flags & (CS_RUNTIME | CS_LIBRARY_VALIDATION | CS_RESTRICT):
        return _signature_verdict(exe, flags, False, False, "codesign", argv)
    ent_argv = ["codesign", "-d", "--entitlements", "-", file_arg(str(exe))]
    ents = runner.run(ent_argv).output
    return _signature_verdict(exe, flags, entitlement(ents, ALLOW_DYLD), entitlement(ents, DISABLE_LV), "codesign",
                              ent_argv)


def check_restrict_segment(system: str, runner: Runner, exe: Path, tools: bool = True) -> Check:
    argv = ["otool", "-l", file_arg(str(exe))]
    if system != "darwin":
        return skipped("__RESTRICT segment", "Linux: no Mach-O", command=argv)
    info, why = read_macho(exe)
    tool_says: bool | None = None
    if tools:
        result = runner.run(argv)
        if result.ok:
            tool_says = bool(re.search(r"segname\s+__RESTRICT\b", result.stdout) or
                             re.search(r"sectname\s+__restrict\b", result.stdout))
    if info is not None:
        hits = [s.arch for s in info.slices if s.restrict_section]
        note = "" if tool_says is None or tool_says == bool(hits) else \
            f" (otool -l says {'it has one' if tool_says else 'none'}; the in-process reading decides)"
        if hits:
            return failed("__RESTRICT segment", f"{exe.name} has a __RESTRICT,__restrict section ({', '.join(hits)}), "
                          f"so dyld ignores DYLD_* variables{note}",
                          "use a build of the program without the __RESTRICT,__restrict section", command=argv)
        return passed("__RESTRICT segment", f"none in {' '.join(info.archs)} (read in-process){note}", command=argv)
    if not tools:
        return _no_tools("__RESTRICT segment", exe, why or "", argv)
    if tool_says is None:
        return warned("__RESTRICT segment", f"{exe.name} could not be read in-process ({why}) and `otool -l` failed, "
                      "so the segments were not checked", "point capscan at the program binary itself",
                      command=argv)
    if tool_says:
        return failed("__RESTRICT segment", f"{exe.name} has a __RESTRICT segment, so dyld ignores DYLD_* variables",
                      "use a build of the program without the __RESTRICT,__restrict section", command=argv)
    return passed("__RESTRICT segment", "none (otool -l)", command=argv)


def binary_archs(runner: Runner, path: Path, tools: bool) -> tuple[list[str] | None, str]:
    """(architectures, how they were read); None when neither the reader nor lipo could."""
    info, why = read_macho(path)
    if info is not None:
        return info.archs, "in-process"
    if tools:
        result = runner.run(["lipo", "-archs", file_arg(str(path))])
        if result.ok and result.stdout.split():
            return result.stdout.split(), "lipo"
    return None, why or "unreadable"


def check_archs(system: str, runner: Runner, exe: Path, tools: bool = True) -> tuple[list[str] | None, Check]:
    argv = ["lipo", "-archs", file_arg(str(exe))]
    if system != "darwin":
        return None, skipped("architectures", "Linux: an ELF program, one architecture", command=argv)
    archs, how = binary_archs(runner, exe, tools)
    if archs is None:
        return None, failed("architectures", f"{exe.name} could not be read as a Mach-O program ({how})"
                            + ("" if tools else " and the Command Line Tools are not installed"),
                            "point capscan at the program binary itself", command=argv)
    if how == "in-process" and tools:
        cross = runner.run(argv)
        if cross.ok and sorted(cross.stdout.split()) != sorted(archs):
            how += f"; lipo says {' '.join(cross.stdout.split())}"
    apple = [a for a in archs if a in ("arm64", "arm64e")]
    if not apple and "x86_64" in archs:
        return archs, warned("architectures", f"{exe.name} is x86_64 only: it runs under Rosetta, and the x86_64 "
                             "slice of the library will be injected", "an arm64 build of the program is much "
                             "faster", command=argv, data={"archs": archs, "read": how})
    if not apple:
        return archs, failed("architectures", f"{exe.name} has no arm64 slice ({' '.join(archs)})",
                             "use an arm64 build of the program", command=argv, data={"archs": archs})
    return archs, passed("architectures", f"{' '.join(archs)} ({how}): needs the {' + '.join(apple)} slice",
                         command=argv, data={"archs": archs, "read": how})


# --------------------------------------------------------------------------- the launch chain vs the library


def needed_slices(archs: list[str]) -> list[str]:
    """The library slices a program with these architectures can load on Apple silicon."""
    apple = [a for a in archs if a in ("arm64", "arm64e")]
    return apple or [a for a in archs if a in ("x86_64", "x86_64h")][:1] or list(archs)


def sip_lets_apple_binaries_load(sip: str) -> bool:
    """With SIP off (or a custom/unknown configuration), dyld inserts the library into Apple's binaries too."""
    return sip != "enabled"


def check_library_arm64e(system: str, sip: str, lib_archs: list[str] | None, library: Path,
                         boot: str | None = None, inject_children: bool = False) -> Check:
    """Apple's arm64e programs the command starts (/bin/sh, /usr/bin/env, tee). With SIP enabled they drop
    DYLD_* variables and never load the library; by default the interposer drops itself from the variable
    once loaded, so they never see it either. With --inject-children and SIP off they inherit it: a library
    without arm64e halts them (exit 134, measured by the kronk fleet); with an arm64e slice, reports differ
    (Tart and Veertu ship one for them; others say they refuse third-party arm64e code unless the
    -arm64e_preview_abi boot-arg is set). Children are a warning, never a refusal: the workload itself is
    the launch chain's check."""
    if system != "darwin":
        return skipped("arm64e slice", "Linux: no arm64e")
    if lib_archs is None:
        return failed("arm64e slice", f"the architectures of {library.name} could not be read",
                      "rebuild it: make -C native/interposer darwin")
    held = " ".join(lib_archs)
    if not sip_lets_apple_binaries_load(sip):
        return passed("arm64e slice", f"{library.name} has {held}; with SIP enabled Apple's arm64e programs drop "
                      "DYLD_* variables, so the ones the command starts never load it")
    if not inject_children:
        return passed("arm64e slice", f"{library.name} has {held}; the programs the command starts do not inherit "
                      "it (the interposer drops itself from the variable once loaded), so Apple's arm64e ones never "
                      "try to load it")
    state = "off" if sip == "disabled" else "in a " + sip + " state"
    args = f"kern.bootargs {boot!r}" if boot is not None else "kern.bootargs unreadable"
    scrub = "leave out --inject-children unless the GPU work runs in a child"
    if "arm64e" not in lib_archs:
        return warned("arm64e slice", f"{library.name} has no arm64e slice ({held}), so with --inject-children and "
                      f"SIP {state} an Apple arm64e program the command starts (/bin/sh, /usr/bin/env, tee) would "
                      "inherit the variable and halt (exit 134)",
                      f"{scrub}, or use a library with arm64e (make macos-native on a Mac)")
    if plat.arm64e_preview_abi(boot):
        return passed("arm64e slice", f"{library.name} has {held} and the boot-args hold "
                      f"{plat.ARM64E_PREVIEW_ABI}, so Apple's arm64e programs the command starts can load it")
    return warned("arm64e slice", f"{library.name} has {held}, but with SIP {state} whether Apple's arm64e programs "
                  f"the command starts load third-party arm64e code without the {plat.ARM64E_PREVIEW_ABI} boot-arg "
                  f"is disputed ({args}); if one halts (exit 134), that is why", scrub)


# Programs whose workload is a child (or a fresh exec that reads the environment the interposer scrubbed)
SHELL_NAMES = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "tcsh", "csh"})
LAUNCHER_NAMES = frozenset({"env", "timeout", "gtimeout", "nohup", "nice", "stdbuf", "xargs", "make", "gmake",
                            "time"})
CHILD_GPU_PROGRAMS = {"ollama": "ollama does its GPU work in an `ollama runner` child"}


def check_children(target: Target, inject_children: bool) -> Check:
    """Children are scrubbed by default, so a command whose GPU work runs in a child is refused before it
    runs, with the flag that makes it work, rather than launched to come back 'not verified'."""
    names = [p.name for p in (target.path, *target.chain) if p is not None]
    if inject_children:
        return passed("children", "--inject-children: the programs the command starts inherit the library too")
    child_gpu = next((CHILD_GPU_PROGRAMS[n] for n in names if n in CHILD_GPU_PROGRAMS), None)
    if child_gpu:
        return failed("children", f"{child_gpu}, and by default the programs the command starts do not inherit "
                      "the library", "pass --inject-children (capscan remedy run --inject-children ... -- ollama "
                      "serve)")
    launcher = next((n for n in reversed(names) if n in SHELL_NAMES or n in LAUNCHER_NAMES), None)
    if launcher == (target.real.name if target.real else None):
        kind = "a shell" if launcher in SHELL_NAMES else "a launcher"
        return failed("children", f"{target.real} is {kind}: the workload is a program it starts, which by default "
                      "does not inherit the library", "run the program itself (capscan remedy run -- "
                      "/path/to/llama-bench ...), or pass --inject-children")
    return passed("children", "the programs the command starts do not inherit the library (the interposer drops "
                  "itself from the variable once loaded; --inject-children keeps it)")


# --------------------------------------------------------------------------- launchers that exec the workload

FRAMEWORK_INTERPRETER = Path("Resources", "Python.app", "Contents", "MacOS", "Python")
PYTHON_FRAMEWORK_LIB = re.compile(r"(?:^|/)Python\.framework/(?:Versions/[^/]+/)?Python$")
RUN_SUBCOMMANDS = frozenset({"run", "exec"})


@dataclass
class Launcher:
    """A program that starts the workload instead of being it. With the default scrub (at load) it would
    drop the library before the workload starts; the remedy sets CAPSCAN_INTERPOSER_SCRUB=device instead,
    so the library is dropped only by the process that asks Metal for a device."""

    kind: str             # "framework-python" | "run-wrapper"
    path: Path            # the launcher itself
    execs: Path | None    # the program it execs, when the file says which
    how: str              # what about the file or the command line says so


def _linked_framework(exe: Path, dylibs: tuple[str, ...]) -> Path | None:
    """The Python framework's version directory a launcher links (`.../Python.framework/Versions/X/Python`,
    the library pythonw.c finds with dladdr(Py_Initialize)), when its install name says where it is."""
    for name in dylibs:
        if not PYTHON_FRAMEWORK_LIB.search(name):
            continue
        if name.startswith("@executable_path/"):
            return Path(os.path.normpath(exe.parent / name[len("@executable_path/"):])).parent
        if name.startswith("/"):
            return Path(name).parent
        return exe.parent.parent  # @rpath/@loader_path: the framework's own layout, bin/ beside Resources/
    return None


def framework_interpreter(exe: Path, system: str) -> Path | None:
    """python.org's and Homebrew's framework Python: `<Versions/X>/bin/python3.x` (and a venv's
    bin/python, a link or a copy of it) is a small program that re-execs `<Versions/X>/Resources/
    Python.app/Contents/MacOS/Python` with its own environment (CPython's Mac/Tools/pythonw.c). Told by
    what the file is, not its name: on macOS a Mach-O that links the Python framework and whose
    framework holds that interpreter (pythonw.c derives it the same way); on the Linux stand-in, a
    binary (not a script) in a bin/ whose sibling Resources/ holds it."""
    if _shebang(exe) is not None:
        return None
    if system == "darwin":
        m, _why = read_macho(exe)
        if m is None:
            return None
        version_dir = _linked_framework(exe, m.running_slice().dylibs)
    else:
        version_dir = exe.parent.parent if exe.parent.name == "bin" else None
    if version_dir is None:
        return None
    real = version_dir / FRAMEWORK_INTERPRETER
    if not real.is_file() or not os.access(real, os.X_OK):
        return None
    real = Path(os.path.realpath(real))
    return None if real == exe else real


def find_launcher(target: Target, argv: list[str], system: str) -> Launcher | None:
    """A framework Python launcher anywhere on the launch path (the program, or a `#!` script's
    interpreter), else a `PROGRAM run|exec CMD ...` wrapper (uv, poetry, pipenv, conda, pixi run: they
    start the program they are given, as a child or by exec)."""
    for p in target.chain:
        real = framework_interpreter(p, system)
        if real is not None:
            how = ("it links the Python framework" if system == "darwin" else "it sits in a framework's bin/")
            return Launcher("framework-python", p, real, f"{how}, whose interpreter {real} it re-execs")
    if len(argv) > 2 and argv[1] in RUN_SUBCOMMANDS and target.real is not None:
        return Launcher("run-wrapper", target.real, None, f"`{Path(argv[0]).name} {argv[1]} {argv[2]} ...` "
                        "starts another program (the way uv, poetry, pipenv, conda and pixi run do)")
    return None


def check_launcher(launcher: Launcher, inject_children: bool) -> Check:
    data = {"kind": launcher.kind, "launcher": str(launcher.path),
            "execs": str(launcher.execs) if launcher.execs else None}
    what = (f"{launcher.path} is a framework Python launcher ({launcher.how}): the interpreter that runs the "
            "workload is that program" if launcher.kind == "framework-python" else
            f"{launcher.how}: the workload is a program it starts")
    if inject_children:
        return passed("launcher", f"{what}; --inject-children: it inherits the library", data=data)
    data["scrub"] = "device"
    return passed("launcher", f"{what}, so the library is dropped from the variable only by the process that asks "
                  "Metal for a device (CAPSCAN_INTERPOSER_SCRUB=device), not by the launcher; the programs the "
                  "launcher itself starts before that inherit it too", data=data)


def scrub_for(checks: list[Check]) -> str:
    """The CAPSCAN_INTERPOSER_SCRUB value the preflight decided: "device" for a launcher, else "1"."""
    from analyzer.remedy.prefix import SCRUB_AT_DEVICE, SCRUB_AT_LOAD

    found = any(c.name == "launcher" and c.data.get("scrub") == SCRUB_AT_DEVICE for c in checks)
    return SCRUB_AT_DEVICE if found else SCRUB_AT_LOAD


def check_launch_chain(system: str, runner: Runner, target: "Target", lib_archs: list[str] | None, sip: str,
                       tools: bool, boot: str | None = None) -> Check:
    """Every binary the launch execs (program, #! interpreters, /usr/bin/env, what env runs) against the library."""
    if system != "darwin":
        return skipped("launch chain", "Linux: one architecture")
    binaries = [p for p in target.chain if _shebang(p) is None]
    if lib_archs is None:
        return failed("launch chain", "the library's architectures could not be read",
                      "rebuild it: make -C native/interposer macos-native")
    seen: list[str] = []
    halted: list[str] = []
    disputed: list[str] = []
    unread: list[str] = []
    for path in binaries:
        if sip == "enabled" and is_protected(path):
            seen.append(f"{path} (SIP-protected: drops the variable)")
            continue
        archs, how = binary_archs(runner, path, tools)
        if archs is None:
            unread.append(f"{path} ({how})")
            continue
        need = needed_slices(archs)
        missing = [a for a in need if a not in lib_archs]
        if missing:
            halted.append(f"{path} ({' '.join(archs)}; needs {' '.join(missing)})")
        elif "arm64e" in need and sip_lets_apple_binaries_load(sip) and not plat.arm64e_preview_abi(boot):
            disputed.append(f"{path} (arm64e: may refuse third-party arm64e code without "
                            f"{plat.ARM64E_PREVIEW_ABI})")
        seen.append(f"{path} {'/'.join(archs)}")
    data = {"chain": [str(p) for p in target.chain], "binaries": seen, "halted": halted}
    if halted:
        return failed("launch chain", f"the library has {' '.join(lib_archs)}, so dyld would halt "
                      + ", ".join(halted), "use the universal arm64+arm64e+x86_64 library (make macos-native on a "
                      "Mac), or start the program directly instead of through those binaries", data=data)
    if disputed:
        return warned("launch chain", "reports differ on whether these load the library's arm64e slice with SIP off "
                      "and no boot-arg: " + ", ".join(disputed), "start the program directly, or set the "
                      "-arm64e_preview_abi boot-arg if it halts (exit 134)", data=data)
    if unread:
        return warned("launch chain", f"not checked against the library: {', '.join(unread)}",
                      "point capscan at the program binary itself", data=data)
    return passed("launch chain", "every binary the launch runs can load the library: " + "; ".join(seen),
                  data=data)


# --------------------------------------------------------------------------- already injected


def check_already_injected(env: Mapping[str, str], stock_shim: dict | None, dylib_name: str = "libcapscan_interposer",
                           tart_dylib: Path = TART_DYLIB) -> list[Check]:
    out = []
    for var in all_injection_vars():
        value = env.get(var, "")
        if value.strip():
            ours = dylib_name in value
            out.append(failed(
                "already injected",
                f"{var} is already set ({value}){': capscan’s interposer is active in this shell' if ours else ''}, "
                "and capscan never injects twice",
                f"start from a clean environment: env -u {var} capscan remedy run ...  "
                "(or keep the existing shim and do not use capscan's)"))
    if stock_shim:
        out.append(failed("already injected", f"the stock run already shows the {stock_shim.get('name')} banner "
                          f"(apple_family_max={stock_shim.get('apple_family_max')}), so it is not a stock run and "
                          "another shim would be stacked on top", "pick a run made without any shim (capscan runs)"))
    tart_on = [v for v in ("TART_METAL_APPLE_FAMILY_MAX",) if env.get(v, "").strip() not in ("", "0")]
    if tart_dylib.exists():
        if tart_on:
            out.append(warned("Tart shim", f"{tart_dylib} is installed and TART_METAL_APPLE_FAMILY_MAX="
                              f"{env.get('TART_METAL_APPLE_FAMILY_MAX')} is set; capscan's interposer reads "
                              "CAPSCAN_METAL_APPLE_FAMILY_MAX first, so its own cap applies",
                              "set TART_METAL_APPLE_FAMILY_MAX=0 to make Tart's image behave stock"))
        else:
            out.append(passed("Tart shim", f"{tart_dylib} is installed but not injected here"))
    aliases = [v for v in ALIAS_FAMILY_VARS if v in env]
    if aliases and not tart_on:
        out.append(warned("shim variables", f"{', '.join(aliases)} set; capscan's interposer reads "
                          "CAPSCAN_METAL_APPLE_FAMILY_MAX first, which capscan sets, so they are ignored"))
    if not out or all(c.status != "fail" for c in out):
        out.insert(0, passed("already injected", f"no shim injected yet (no {' / '.join(all_injection_vars())}, "
                             f"no banner in the stock run)"))
    return out


# --------------------------------------------------------------------------- all of it


def check_kernels(db, runner: Runner, system: str) -> Check:
    """capscan-probe --kernels in this guest, stock (analyzer.remedy.kernels); a pass is reused for the boot."""
    from analyzer.remedy import kernels as km

    probe, missing = km.probe_for_kernels(runner, system)
    if probe is None:
        return km.check(km.KernelCheck(error=missing), env=runner.env)
    return km.check(km.run_kernel_check(db, Runner(plat.stock_env(runner.env), timeout=60), probe, system),
                    env=runner.env)


def check_kernels_injected(runner: Runner, system: str, inj: plat.Injection, library: Path, family: int) -> Check:
    """The same check with the library loaded, before the workload: a fail there refuses too (the claims are
    what the workload will see). Children not scrubbed, so the probe's exec'd check process loads it too."""
    from analyzer.remedy import kernels as km
    from analyzer.remedy.prefix import injection_vars

    probe, missing = km.probe_for_kernels(runner, system)
    if probe is None:
        return km.check(km.KernelCheck(error=missing), env=runner.env, name=km.INJECTED_NAME)
    env = {**plat.stock_env(runner.env), **injection_vars(inj, str(library), family, inject_children=True)}
    return km.check(km.run_injected_check(Runner(env, timeout=60), probe), env=runner.env,
                    name=km.INJECTED_NAME)


def run_preflight(db, *, cmd: list[str] | None, family_spec: str, diag: Diagnosis | None, stock_shim: dict | None,
                  dylib_path: str | None, runner: Runner, record_checksum: bool = True,
                  inject_children: bool = False, kernels: bool = False):
    """Every check for launching cmd (or, with cmd None, for printing `remedy env` prefixes).

    Returns (checks, injection, family, DylibResult); the last three are None when
    an early check failed so that nothing further can be decided.
    """
    from analyzer.remedy import dylib as dylibmod
    from analyzer.remedy import family as famod

    system, machine = plat.system(), plat.machine()
    inj = plat.injection(system)
    brand = plat.brand_string(runner)
    checks: list[Check] = [check_platform(inj, system, machine, brand)]
    if inj is None or checks[0].failed:
        return checks, None, None, None
    if system == "darwin":
        guest, how = plat.is_guest(runner, brand)
        checks.append(check_guest(system, guest, how, brand))
    fam, fcheck = famod.resolve(family_spec, diag.host_family if diag else None, brand)
    checks.append(fcheck)
    sip, sip_line = sip_state(runner) if system == "darwin" else ("n/a", "")
    checks.append(check_sip(system, sip, sip_line))
    tools = plat.developer_tools(runner)
    target = None
    if cmd is not None:
        target, tcheck = resolve_target(cmd[0], runner.env)
        checks.append(tcheck)
        if not tcheck.failed and target.real is not None:
            launcher = find_launcher(target, cmd, system)
            if launcher is not None:
                checks.append(check_launcher(launcher, inject_children))
                if launcher.execs is not None:  # the binary that must load the library: every check below reads it
                    target.chain.append(launcher.execs)
            checks.append(check_protected(system, target, sip))
            checks.append(check_setid(target))
            app = check_ollama_app(target)
            if app is not None:
                checks.append(app)
            checks.append(check_children(target, inject_children))
            exe = target.real
            checks.append(check_codesign(system, runner, exe, tools))
            checks.append(check_restrict_segment(system, runner, exe, tools))
            checks.append(check_archs(system, runner, exe, tools)[1])
        else:
            target = None
    checks.extend(check_already_injected(runner.env, stock_shim))
    if kernels:  # before anything is injected: a GPU that fails the kernels is never given a higher family
        checks.append(check_kernels(db, runner, system))
    lib = dylibmod.prepare(runner, inj, db, explicit=Path(dylib_path) if dylib_path else None,
                           may_record=record_checksum, tools=tools)
    checks.extend(lib.checks)
    if kernels and lib.choice is not None and fam is not None and not any(c.failed for c in checks):
        checks.append(check_kernels_injected(runner, system, inj, lib.choice.path, fam))
    if system == "darwin" and lib.choice is not None and lib.archs is not None:
        boot = plat.boot_args(runner)
        checks.append(check_library_arm64e(system, sip, lib.archs, lib.choice.path, boot, inject_children))
        if target is not None:
            checks.append(check_launch_chain(system, runner, target, lib.archs, sip, tools, boot))
    return checks, inj, fam, lib
