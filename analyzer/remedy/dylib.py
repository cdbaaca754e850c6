"""Find, build on demand and verify capscan's interposer library.

Checks (each a Check): the file exists (built with make when missing), is owned
by the user or root, is not group- or world-writable, and its sha256 equals the
one recorded at build (``SHA256SUMS`` next to it, written by the Makefile; for a
build that writes none, capscan's own record from the first time it saw the
file).

On macOS the library is one universal file with arm64, arm64e and x86_64 slices
(native/interposer/build/macos-native/libcapscan_interposer.dylib), built on
first use with `make macos-native` when the Command Line Tools are installed;
without them capscan says so in one line. Its slices are read in-process
(analyzer.remedy.macho) and checked against every binary of the launch chain by
preflight.
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
MAC_SLICES = ("arm64", "arm64e", "x86_64")
RECORD_ACTION = "dylib-checksum"
CLT_INSTEAD = ("install the Command Line Tools (xcode-select --install) and run capscan again, which builds it; or "
               "pass --dylib PATH with an arm64+arm64e+x86_64 build")


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
    kind: str           # linux | universal | given


def library_path(inj: Injection, directory: Path | None = None) -> Path:
    return (directory or build_dir(inj)) / (MAC_NAME if inj.system == "darwin" else LINUX_NAME)


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


def file_checks(path: Path) -> list[Check]:
    """Ownership and permissions of the library and the real file behind it."""
    real = path.resolve()
    st = real.stat()
    out = []
    if not stat.S_ISREG(st.st_mode):
        return [failed("dylib file", f"{real} is not a regular file", "rebuild it: make -C native/interposer")]
    if st.st_uid not in (os.getuid(), 0):
        out.append(failed("dylib owner", f"{real} is owned by uid {st.st_uid}, neither you nor root, so someone else "
                          "could have replaced the code capscan would inject",
                          f"rebuild it yourself (make -C {native_dir()}) or chown it"))
    else:
        out.append(passed("dylib owner", f"owned by {'root' if st.st_uid == 0 else 'you'}"))
    if st.st_mode & 0o022:
        out.append(failed("dylib permissions", f"{real} is {'group' if st.st_mode & 0o020 else 'world'}-writable "
                          f"(mode {stat.S_IMODE(st.st_mode):o}), so others could change what gets injected",
                          f"chmod go-w {real} and rebuild it"))
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


def checksum_check(db: Database | None, path: Path, *, may_record: bool) -> Check:
    actual = sha256_of(path)
    want, where = recorded_sha(db, path)
    if want is None and where.endswith("SHA256SUMS"):
        return failed("dylib checksum", f"{path.name} is not listed in {where}, so it was not recorded at build",
                      f"rebuild: make -C {native_dir()} " + ("macos-native" if path.suffix == ".dylib" else "linux"))
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
                      f"rebuild it (make -C {native_dir()}) and check who else can write there", data={"sha256": actual})
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
            build_missing: bool = True, may_record: bool = True, tools: bool = False) -> DylibResult:
    checks: list[Check] = []
    choice = Choice(explicit, "given") if explicit is not None else Choice(
        library_path(inj), "universal" if inj.system == "darwin" else "linux")
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
                                 f"read ({how})", CLT_INSTEAD))
        else:
            checks.append(passed("dylib architectures", f"{choice.path.name} has {' '.join(archs)} ({how})",
                                 data={"archs": archs}))
    path_check = loader_path_check(inj, choice.path)
    checks.append(path_check)
    if path_check.failed:
        return DylibResult(checks, choice, None)
    checks.extend(file_checks(choice.path))
    cs = checksum_check(db, choice.path, may_record=may_record)
    checks.append(cs)
    return DylibResult(checks, choice, cs.data.get("sha256") or (sha256_of(choice.path) if not cs.failed else None),
                       archs)


def probe_binary(runner: Runner) -> tuple[Path, str | None]:
    """The built capscan-probe (building it when missing), and why it is not there when that failed."""
    from analyzer.remedy import platform as plat

    inj = plat.injection("darwin")
    path = build_dir(inj) / "capscan-probe"  # type: ignore[arg-type]
    if not path.exists():
        check = build(runner, inj)  # type: ignore[arg-type]
        if check.failed or not path.exists():
            return path, check.reason
    return path, None
