"""Preflight: every reason dyld (or ld.so) would drop or refuse the injection,
predicted before launching. Each check is a small function returning a Check:
pass/fail, one sentence of why, and what to do instead.

The macOS tools (csrutil, codesign, otool, lipo, sysctl) are reached through
the Runner only; file facts (symlinks, shebangs, setuid, the `restricted`
flag) are read directly.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from analyzer.remedy.check import Check, failed, passed, skipped, warned
from analyzer.remedy.platform import ALIAS_FAMILY_VARS, BANNER_NAME, TART_DYLIB, Injection, all_injection_vars
from analyzer.remedy.runner import Runner, file_arg

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


def check_guest(system: str, brand: str | None) -> Check:
    if system != "darwin":
        return skipped("guest", "not macOS")
    if brand is None:
        return warned("guest", "could not read the CPU brand string, so capscan cannot tell guest from host",
                      "check `sysctl -n machdep.cpu.brand_string` prints something like 'Apple M1 Ultra (Virtual)'")
    if "(virtual)" not in brand.lower():
        return failed("guest", f"this is not a VM guest ('{brand}'): a bare-metal Mac already reports its real "
                      "GPU family, so there is nothing to inject",
                      "run this inside the guest, or from this host with --via lume|tart|anka|ssh --vm NAME")
    return passed("guest", f"a macOS guest on {brand}")


def sip_state(runner: Runner) -> tuple[str, str]:
    """('enabled'|'disabled'|'custom'|'unknown', the line read)."""
    result = runner.run(SIP_ARGV)
    text = result.output.strip()
    m = re.search(r"System Integrity Protection status:\s*(enabled|disabled)\s*(\(Custom Configuration\))?", text)
    if not m:
        return "unknown", text.splitlines()[0] if text else "no output"
    return ("custom" if m.group(2) else m.group(1)), m.group(0)


def check_sip(system: str, state: str, line: str) -> Check:
    if system != "darwin":
        return skipped("SIP", "Linux has no System Integrity Protection", command=SIP_ARGV)
    if state == "disabled":
        return passed("SIP", "disabled in this guest, the state every published shim result used", command=SIP_ARGV)
    if state in ("enabled", "custom"):
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


def check_codesign(system: str, runner: Runner, exe: Path) -> Check:
    argv = ["codesign", "-dv", "--verbose=4", file_arg(str(exe))]
    if system != "darwin":
        return skipped("hardened runtime", "Linux: no code signatures", command=argv)
    result = runner.run(argv)
    if not result.found:
        return warned("hardened runtime", "codesign is not available, so the signature could not be checked",
                      "install the Command Line Tools (xcode-select --install)", command=argv)
    flags, signed = parse_codesign_flags(result.output)
    if not signed:
        return passed("hardened runtime", f"{exe.name} is not signed, so dyld honours the variable", command=argv)
    if flags is None:
        return warned("hardened runtime", f"could not read the signature flags of {exe}", command=argv)
    if flags & CS_RESTRICT:
        return failed("hardened runtime", f"{exe.name} is signed with the restrict flag (0x800), so dyld ignores "
                      "DYLD_* variables", "use a build of the program that is not restricted", command=argv)
    if not flags & (CS_RUNTIME | CS_LIBRARY_VALIDATION):
        return passed("hardened runtime", f"signed without hardened runtime (flags=0x{flags:x})", command=argv)
    ent_argv = ["codesign", "-d", "--entitlements", "-", file_arg(str(exe))]
    ents = runner.run(ent_argv).output
    allow, no_lv = entitlement(ents, ALLOW_DYLD), entitlement(ents, DISABLE_LV)
    data = {"flags": flags, "allow_dyld_environment_variables": allow, "disable_library_validation": no_lv}
    if flags & CS_RUNTIME and not allow:
        return failed("hardened runtime", f"{exe.name} has the hardened runtime (flags=0x{flags:x}) without "
                      "allow-dyld-environment-variables, so dyld drops DYLD_INSERT_LIBRARIES",
                      "use a build without hardened runtime (build llama.cpp yourself), or an ad-hoc re-signed "
                      "copy: cp PROGRAM COPY && codesign --force --sign - COPY", command=ent_argv, data=data)
    if not no_lv:
        return failed("library validation", f"{exe.name} enforces library validation, which refuses capscan's "
                      "ad-hoc-signed library (it is not signed with the program's team ID)",
                      "use a build without hardened runtime, or an ad-hoc re-signed copy "
                      "(codesign --force --sign - COPY)", command=ent_argv, data=data)
    return passed("hardened runtime", "hardened, but entitled to allow-dyld-environment-variables and "
                  "disable-library-validation", command=ent_argv, data=data)


def check_restrict_segment(system: str, runner: Runner, exe: Path) -> Check:
    argv = ["otool", "-l", file_arg(str(exe))]
    if system != "darwin":
        return skipped("__RESTRICT segment", "Linux: no Mach-O", command=argv)
    result = runner.run(argv)
    if not result.found:
        return warned("__RESTRICT segment", "otool is not available, so the segments could not be checked",
                      "install the Command Line Tools (xcode-select --install)", command=argv)
    if re.search(r"segname\s+__RESTRICT\b", result.stdout) or re.search(r"sectname\s+__restrict\b", result.stdout):
        return failed("__RESTRICT segment", f"{exe.name} has a __RESTRICT segment, so dyld ignores DYLD_* variables",
                      "use a build of the program without the __RESTRICT,__restrict section", command=argv)
    return passed("__RESTRICT segment", "none", command=argv)


def check_archs(system: str, runner: Runner, exe: Path) -> tuple[list[str] | None, Check]:
    argv = ["lipo", "-archs", file_arg(str(exe))]
    if system != "darwin":
        return None, skipped("architectures", "Linux: an ELF program, one architecture", command=argv)
    result = runner.run(argv)
    if not result.ok:
        return None, failed("architectures", f"lipo could not read {exe} as a Mach-O program "
                            f"({result.output.strip()[:120] or 'no output'})",
                            "point capscan at the program binary itself", command=argv)
    archs = result.stdout.split()
    apple = [a for a in archs if a in ("arm64", "arm64e")]
    if not apple and "x86_64" in archs:
        return archs, warned("architectures", f"{exe.name} is x86_64 only: it runs under Rosetta, and the x86_64 "
                             "slice of the library will be injected", "an arm64 build of the program is much "
                             "faster", command=argv, data={"archs": archs})
    if not apple:
        return archs, failed("architectures", f"{exe.name} has no arm64 slice ({' '.join(archs)})",
                             "use an arm64 build of the program", command=argv)
    return archs, passed("architectures", f"{' '.join(archs)}: needs the {' + '.join(apple)} slice", command=argv,
                         data={"archs": archs})


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


def banner_seen(text: str) -> bool:
    return f"[{BANNER_NAME}] enabled for" in text


def run_preflight(db, *, cmd: list[str] | None, family_spec: str, diag: dict, stock_shim: dict | None,
                  dylib_path: str | None, runner: Runner, record_checksum: bool = True):
    """All checks for launching cmd (or, with cmd None, for printing env lines).

    Returns (checks, injection, family, dylib result); the last three are None
    when an early check makes the rest meaningless."""
    from analyzer.remedy import dylib as dylibmod
    from analyzer.remedy import family as famod
    from analyzer.remedy import platform as plat

    system, machine = plat.system(), plat.machine()
    inj = plat.injection(system)
    brand = plat.brand_string(runner)
    checks: list[Check] = [check_platform(inj, system, machine, brand)]
    if inj is None or checks[0].failed:
        return checks, None, None, None
    if system == "darwin":
        checks.append(check_guest(system, brand))
    fam, fcheck = famod.resolve(family_spec, diag.get("host_family"), brand)
    checks.append(fcheck)
    sip, sip_line = sip_state(runner) if system == "darwin" else ("n/a", "")
    checks.append(check_sip(system, sip, sip_line))
    archs = None
    if cmd is not None:
        target, tcheck = resolve_target(cmd[0], runner.env)
        checks.append(tcheck)
        if not tcheck.failed and target.real is not None:
            checks.append(check_protected(system, target, sip))
            checks.append(check_setid(target))
            exe = target.real
            checks.append(check_codesign(system, runner, exe))
            checks.append(check_restrict_segment(system, runner, exe))
            archs, acheck = check_archs(system, runner, exe)
            checks.append(acheck)
    checks.extend(check_already_injected(runner.env, stock_shim))
    lib = dylibmod.prepare(runner, inj, db, exe_archs=archs, explicit=Path(dylib_path) if dylib_path else None,
                           may_record=record_checksum)
    checks.extend(lib.checks)
    return checks, inj, fam, lib
