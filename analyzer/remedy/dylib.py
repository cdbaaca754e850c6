"""Choose, verify and (only when it must) build capscan's interposer library.

Which library, in this order (one "dylib choice" check says which was chosen and why):

- ``--dylib PATH``: that file.
- Linux: the LD_PRELOAD stand-in (native/interposer/build/linux/libcapscan_interposer.so),
  built with `make linux` when missing.
- macOS:
  1. a `make macos-native` build (build/macos-native/libcapscan_interposer.dylib under the
     interposer's sources; for an installed capscan, the sources staged into the user's cache
     dir): arm64 + arm64e + x86_64, built on a Mac with Apple's toolchain. An opt-in upgrade,
     preferred whenever it is there: only it has arm64e, which Apple's arm64e programs
     (/bin/sh, /usr/bin/env, tee) need to load the library once SIP is off.
  2. the prebuilt library shipped in the package (analyzer/_native/darwin/, arm64 + x86_64 from
     the SDK-less cross build `make -C native/interposer darwin`, committed and carried by the
     wheel): no compiler and no Command Line Tools needed, so a headless guest can use it.
  3. neither (a tree without the packaged files): built on first use with `make macos-native`
     when the Command Line Tools are installed; without them capscan says so in one line.

Checks on the chosen file (each a Check): it is owned by the user or root, is not group- or
world-writable, and its sha256 equals the one recorded at build (``SHA256SUMS`` next to it,
written by the Makefile; the packaged library is checked against the packaged SHA256SUMS; for a
build that writes none, capscan's own record from the first time it saw the file). On macOS its
slices are read in-process (analyzer.remedy.macho) and checked against every binary of the
launch chain by preflight: an arm64e program on the launch path itself is refused when the library
has no arm64e slice (the packaged one). Apple's arm64e programs the command starts are not: with
SIP off and a library without arm64e that is a warning, and only with --inject-children (by
default the interposer drops itself from the variable, so they never load it).
capscan-probe is chosen the same way (macos-native build, then the packaged one).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import analyzer
from analyzer.remedy import macho
from analyzer.remedy.check import Check, failed, passed, warned
from analyzer.remedy.platform import Injection, developer_tools
from analyzer.remedy.runner import Runner, file_arg
from analyzer.store import remedy_records as records

if TYPE_CHECKING:
    from analyzer.store.db import Database

LINUX_NAME = "libcapscan_interposer.so"
MAC_NAME = "libcapscan_interposer.dylib"
RECORD_ACTION = "dylib-checksum"
CLT_INSTEAD = ("install the Command Line Tools (xcode-select --install) and run capscan again, which builds it; or "
               "pass --dylib PATH with an arm64+arm64e+x86_64 build")
PROBE_NAME = "capscan-probe"
# The prebuilt macOS library and probe the package ships (make -C native/interposer darwin).
PACKAGED_DIR = Path(analyzer.__file__).resolve().parent / "_native" / "darwin"
PACKAGED_SLICES = "arm64 + x86_64"
PACKAGED_FIX = ("reinstall capscan (pip install --force-reinstall capscan, or pipx reinstall capscan) to restore the "
                "packaged library, or rebuild it in a checkout: make -C native/interposer darwin")


def native_dir() -> Path:
    """The interposer's sources, where make builds them: a checkout's native/interposer; for an
    installed capscan (pip install ., pipx), the copy shipped in the package (analyzer/_native,
    see setup.py), staged once into the user's cache dir, since site-packages may not be writable."""
    checkout = Path(analyzer.__file__).resolve().parent.parent / "native" / "interposer"
    if (checkout / "Makefile").is_file():
        return checkout
    packaged = Path(analyzer.__file__).resolve().parent / "_native" / "interposer"
    if (packaged / "Makefile").is_file():
        return staged_sources(packaged)
    return checkout  # neither: build() says so and suggests --dylib


def staged_sources(packaged: Path) -> Path:
    import shutil

    import platformdirs

    staged = platformdirs.user_cache_path("capscan") / f"interposer-{analyzer.__version__}"
    if not (staged / "Makefile").is_file():
        staged.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copytree(packaged, staged, dirs_exist_ok=True)
    return staged


def build_dir(inj: Injection) -> Path:
    return native_dir() / "build" / inj.build_dir


@dataclass
class Choice:
    path: Path
    kind: str           # linux | native (make macos-native) | packaged (analyzer/_native/darwin) | given
    why: str = ""       # one sentence: why this library


def library_path(inj: Injection, directory: Path | None = None) -> Path:
    """Where make builds the library (build/macos-native or build/linux under the sources)."""
    return (directory or build_dir(inj)) / (MAC_NAME if inj.system == "darwin" else LINUX_NAME)


def packaged_library(directory: Path | None = None) -> Path:
    return (directory or PACKAGED_DIR) / MAC_NAME


def choose(inj: Injection, *, explicit: Path | None = None, native: Path | None = None,
           packaged: Path | None = None) -> Choice:
    """Which library to inject, and why (see the module docstring); nothing is built here.
    ``native`` (a build directory) and ``packaged`` (the packaged directory) default to the real ones."""
    if explicit is not None:
        return Choice(explicit, "given", f"{explicit}, given with --dylib")
    built = library_path(inj, native)
    if inj.system != "darwin":
        return Choice(built, "linux", f"the Linux stand-in {built} (hooks the fake Metal device only)")
    if built.exists():
        return Choice(built, "native", f"the macos-native build {built} (arm64 + arm64e + x86_64, built on a Mac "
                      "with the Command Line Tools), which is preferred over the prebuilt library shipped with "
                      "capscan")
    shipped = packaged_library(packaged)
    if shipped.exists():
        return Choice(shipped, "packaged", f"the prebuilt library shipped with capscan, {shipped} "
                      f"({PACKAGED_SLICES}, no arm64e; no compiler needed), because there is no macos-native build "
                      f"at {built}; for arm64e, build one with the Command Line Tools (make -C {native_dir()} "
                      "macos-native) and capscan prefers it from then on")
    return Choice(built, "native", f"{built}, built with make macos-native, because neither it nor a prebuilt "
                  f"library ({shipped}) is there")


def rebuild_hint(path: Path, kind: str = "") -> str:
    """What to do about a library (or probe) whose file or checksum is wrong."""
    if kind == "packaged":
        return PACKAGED_FIX
    return f"rebuild it: make -C {native_dir()} " + ("macos-native" if path.suffix == ".dylib" else "linux")


# Where each loader splits its injection variable into several paths.
LOADER_SEPARATORS = {"LD_PRELOAD": " :\t\n", "DYLD_INSERT_LIBRARIES": ":"}


def loader_path_check(inj: Injection, path: Path) -> Check:
    """ld.so splits LD_PRELOAD at spaces and colons, dyld splits
    DYLD_INSERT_LIBRARIES at colons: a library path holding one would be
    cut in two, and the loader would load whatever the first part names
    (relative: from the current directory), not the file every check passed."""
    seps = LOADER_SEPARATORS.get(inj.env_var, ":")
    found = sorted({repr(c) for c in str(path) if c in seps})
    if found:
        return failed("dylib path", f"{path} contains {', '.join(found)}, where {inj.loader} splits {inj.env_var} "
                      "into several libraries, so it would load another file than the one checked",
                      "build or copy the library to a directory whose path has no spaces or colons and pass it "
                      "with --dylib (it is verified there)")
    return passed("dylib path", f"no {inj.env_var} separator in the path")


def library_archs(runner: Runner, path: Path, *, tools: bool) -> tuple[list[str] | None, str]:
    """The slices of a library, read in-process; `lipo -archs` only as a fallback with the tools."""
    try:
        return macho.read(path).archs, "in-process"
    except macho.MachOError as exc:
        why = str(exc)
    if tools:
        result = runner.run(["lipo", "-archs", file_arg(str(path))])
        if result.ok and result.stdout.split():
            return result.stdout.split(), "lipo"
    return None, why


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build(runner: Runner, inj: Injection) -> Check:
    argv = ["make", "--no-print-directory", "-C", str(native_dir()), inj.make_target]
    if inj.system == "darwin" and not developer_tools(runner):
        return failed("dylib build", "the interposer library is not built yet and the Command Line Tools are not "
                      "installed, so capscan cannot build it", CLT_INSTEAD, command=argv)
    if not (native_dir() / "Makefile").is_file():
        return failed("dylib build", f"the interposer is not built and its sources are not here ({native_dir()})",
                      "pass --dylib PATH with a library you built (make -C native/interposer "
                      f"{inj.make_target} in a checkout of capscan), or reinstall capscan with its sources "
                      "(pip install . ships them)", command=argv)
    result = runner.run(argv, timeout=600)
    if not result.ok:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        what = ("the Command Line Tools (xcode-select --install)" if inj.system == "darwin"
                else "gcc, gobjc and make (apt-get install -y --no-install-recommends gcc gobjc make)")
        return failed("dylib build", f"building the interposer failed ({tail[0]})", f"install {what} and retry",
                      command=argv)
    return passed("dylib build", "built on demand from native/interposer/"
                  + (" (arm64 + arm64e + x86_64, ad-hoc signed)" if inj.system == "darwin" else ""), command=argv)


def file_checks(path: Path, kind: str = "") -> list[Check]:
    """Ownership and permissions of the library and the real file behind it."""
    real = path.resolve()
    st = real.stat()
    out = []
    if not stat.S_ISREG(st.st_mode):
        return [failed("dylib file", f"{real} is not a regular file", rebuild_hint(path, kind))]
    if st.st_uid not in (os.getuid(), 0):
        out.append(failed("dylib owner", f"{real} is owned by uid {st.st_uid}, neither you nor root, so someone else "
                          "could have replaced the code capscan would inject",
                          f"{rebuild_hint(path, kind)} (as yourself), or chown it"))
    else:
        out.append(passed("dylib owner", f"owned by {'root' if st.st_uid == 0 else 'you'}"))
    if st.st_mode & 0o022:
        out.append(failed("dylib permissions", f"{real} is {'group' if st.st_mode & 0o020 else 'world'}-writable "
                          f"(mode {stat.S_IMODE(st.st_mode):o}), so others could change what gets injected",
                          f"chmod go-w {real}, then {rebuild_hint(path, kind)}"))
    else:
        out.append(passed("dylib permissions", f"mode {stat.S_IMODE(st.st_mode):o}, writable only by its owner"))
    return out


def recorded_sha(db: Database | None, path: Path) -> tuple[str | None, str]:
    sums = path.parent / "SHA256SUMS"
    if sums.is_file():
        for line in sums.read_text(errors="replace").splitlines():
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and parts[1].lstrip("*") == path.name:
                return parts[0].lower(), str(sums)
        return None, str(sums)
    if db is not None:
        for a in reversed(records.actions(db, RECORD_ACTION)):
            if a["args"].get("path") == str(path.resolve()):
                return a["args"].get("sha256"), "capscan's record"
    return None, ""


def checksum_check(db: Database | None, path: Path, *, may_record: bool, kind: str = "") -> Check:
    actual = sha256_of(path)
    want, where = recorded_sha(db, path)
    if want is None and where.endswith("SHA256SUMS"):
        return failed("dylib checksum", f"{path.name} is not listed in {where}, so it was not recorded at build",
                      rebuild_hint(path, kind))
    if want is None:
        if db is not None and may_record:
            records.record(db, RECORD_ACTION, {"path": str(path.resolve()), "sha256": actual}, "recorded", None)
            return warned("dylib checksum", f"no checksum was recorded at build; recorded sha256 {actual[:16]}… now, "
                          "and later runs are checked against it",
                          f"if you did not build {path} yourself, rebuild it: make -C {native_dir()}")
        return warned("dylib checksum", "no checksum recorded at build yet (recorded on the first `remedy run`)")
    if want != actual:
        return failed("dylib checksum", f"sha256 of {path.name} is {actual[:16]}…, but {where} recorded "
                      f"{want[:16]}…: the file changed after it was built",
                      f"{rebuild_hint(path, kind)}, and check who else can write there", data={"sha256": actual})
    return passed("dylib checksum", f"sha256 {actual[:16]}… matches {where}", data={"sha256": actual})


@dataclass
class DylibResult:
    checks: list[Check]
    choice: Choice | None
    sha256: str | None
    archs: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.choice is not None and not any(c.failed for c in self.checks)


def prepare(runner: Runner, inj: Injection, db: Database | None, *, explicit: Path | None = None,
            build_missing: bool = True, may_record: bool = True, tools: bool = False,
            native: Path | None = None, packaged: Path | None = None) -> DylibResult:
    """Choose the library (``choose``), build it only when nothing usable is there, and check it.
    ``native``/``packaged``: other directories standing in for build/macos-native and
    analyzer/_native/darwin (tests)."""
    choice = choose(inj, explicit=explicit, native=native, packaged=packaged)
    checks: list[Check] = [passed("dylib choice", choice.why, data={"kind": choice.kind, "path": str(choice.path)})]
    if not choice.path.exists() and explicit is None and build_missing:
        checks.append(build(runner, inj))
    if not choice.path.exists():
        if explicit is None and checks and checks[-1].failed:
            return DylibResult(checks, None, None)
        instead = CLT_INSTEAD if inj.system == "darwin" else f"build it: make -C {native_dir()} {inj.make_target}"
        checks.append(failed("dylib", f"no interposer library at {choice.path}", instead))
        return DylibResult(checks, None, None)
    archs = None
    if inj.system == "darwin":
        archs, how = library_archs(runner, choice.path, tools=tools)
        if archs is None:
            checks.append(failed("dylib architectures", f"{choice.path.name} is not a Mach-O library capscan can "
                                 f"read ({how})", PACKAGED_FIX if choice.kind == "packaged" else CLT_INSTEAD))
        else:
            checks.append(passed("dylib architectures", f"{choice.path.name} has {' '.join(archs)} ({how})",
                                 data={"archs": archs}))
    path_check = loader_path_check(inj, choice.path)
    checks.append(path_check)
    if path_check.failed:
        return DylibResult(checks, choice, None)
    checks.extend(file_checks(choice.path, choice.kind))
    cs = checksum_check(db, choice.path, may_record=may_record, kind=choice.kind)
    checks.append(cs)
    return DylibResult(checks, choice, cs.data.get("sha256") or (sha256_of(choice.path) if not cs.failed else None),
                       archs)


def probe_binary(runner: Runner, *, native: Path | None = None, packaged: Path | None = None) -> tuple[Path, str | None]:
    """capscan-probe: the macos-native build's, else the packaged one (its file and sha256 checked like the
    library's, against the packaged SHA256SUMS), else built with make macos-native; and why there is none when
    that failed. ``native``/``packaged`` as for ``prepare``."""
    from analyzer.remedy import platform as plat

    inj = plat.injection("darwin")
    path = (native or build_dir(inj)) / PROBE_NAME  # type: ignore[arg-type]
    if path.exists():
        return path, None
    shipped = (packaged or PACKAGED_DIR) / PROBE_NAME
    if shipped.exists():
        bad = [c for c in (*file_checks(shipped, "packaged"),
                           checksum_check(None, shipped, may_record=False, kind="packaged")) if c.failed]
        return shipped, (f"the packaged {PROBE_NAME}: {bad[0].reason} ({bad[0].instead})" if bad else None)
    check = build(runner, inj)  # type: ignore[arg-type]
    if check.failed or not path.exists():
        return path, check.reason
    return path, None
