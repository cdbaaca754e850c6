"""Check the cross-built macOS artifacts in build/macos.  Prints failures and
ends with "N passed, N failed"; exits non-zero on any failure.

    python3 tests/check_macho.py [build/macos] [--objdump PATH]
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import macho  # noqa: E402

INSTALL_NAME = "@rpath/libcapscan_interposer.dylib"
METAL = "/System/Library/Frameworks/Metal.framework/Versions/A/Metal"
LIBOBJC = "/usr/lib/libobjc.A.dylib"
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"
COREGRAPHICS = "/System/Library/Frameworks/CoreGraphics.framework/Versions/A/CoreGraphics"
DYLIB_ARCHS = ["arm64", "x86_64"]
OBJC_IMPORTS = {"_class_addMethod", "_class_getInstanceMethod", "_class_getMethodImplementation",
                "_class_getName", "_method_getImplementation", "_method_getTypeEncoding",
                "_method_setImplementation", "_object_getClass", "_sel_registerName",
                "_objc_lookUpClass"}
METAL_IMPORTS = {"_MTLCreateSystemDefaultDevice", "_MTLCopyAllDevices"}
PROBE_SYSTEM_IMPORTS = ["_fork", "_execv", "__NSGetExecutablePath", "_pipe", "_dup2", "_poll", "_read", "_waitpid", "_kill", "_usleep", "__exit",
                        "_clock_gettime", "_sysctlbyname"]
ARTIFACTS = ["libcapscan_interposer.arm64.dylib", "libcapscan_interposer.x86_64.dylib",
             "libcapscan_interposer.universal.dylib", "capscan-probe"]


class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}", file=sys.stderr)


def check_dylib_slice(check, sl, arch, where):
    check(sl.arch == arch, f"{where}: arch {sl.arch}")
    check(sl.filetype == macho.MH_DYLIB, f"{where}: filetype {sl.filetype}")
    check(sl.install_name == INSTALL_NAME, f"{where}: install name {sl.install_name}")
    check(sl.dylibs == [METAL, LIBOBJC, LIBSYSTEM] or sorted(sl.dylibs) == sorted([METAL, LIBOBJC, LIBSYSTEM]),
          f"{where}: linked dylibs {sl.dylibs}")
    check(sl.platform == macho.PLATFORM_MACOS and sl.minos == "13.0", f"{where}: build version {sl.platform} {sl.minos}")
    init = sl.section("__DATA_CONST", "__mod_init_func") or sl.section("__DATA", "__mod_init_func")
    check(init is not None and init.type == macho.S_MOD_INIT_FUNC_POINTERS and init.size == 8,
          f"{where}: exactly one constructor in __mod_init_func")
    ip = sl.section("__DATA", "__interpose")
    check(ip is not None and ip.type == macho.S_INTERPOSING and ip.size == 32,
          f"{where}: __DATA,__interpose of type S_INTERPOSING with two tuples")
    metal = {s for s, lib in sl.imports.items() if lib == METAL}
    objc = {s for s, lib in sl.imports.items() if lib == LIBOBJC}
    check(metal == METAL_IMPORTS, f"{where}: Metal imports {sorted(metal)}")
    check(objc == OBJC_IMPORTS, f"{where}: libobjc imports {sorted(objc)}")
    check("_objc_msgSend" not in sl.imports, f"{where}: no objc_msgSend")
    others = {lib for lib in sl.imports.values()} - {METAL, LIBOBJC, LIBSYSTEM}
    check(not others, f"{where}: imports from unexpected libraries {others}")
    check(sl.exports == [], f"{where}: exports nothing ({sl.exports})")
    ok, info = macho.verify_adhoc_signature(sl)      # every slice, x86_64 too
    check(ok, f"{where}: ad-hoc signature ({info})")


def check_interpose_binds(check, path, objdump):
    if not objdump:
        check(False, "llvm-objdump not found")
        return
    out = subprocess.run([objdump, "--macho", "--bind", path], capture_output=True, text=True).stdout
    for sym in sorted(METAL_IMPORTS):
        check(any("__interpose" in line and "Metal" in line and line.rstrip().endswith(sym)
                  for line in out.splitlines()), f"{path}: __interpose bound to Metal {sym}")


def main(argv):
    build = argv[1] if len(argv) > 1 and not argv[1].startswith("--") else "build/macos"
    objdump = shutil.which("llvm-objdump") or shutil.which("/usr/lib/llvm-14/bin/llvm-objdump")
    if "--objdump" in argv:
        objdump = argv[argv.index("--objdump") + 1]
    check = Checker()
    thin = {}
    for arch in DYLIB_ARCHS:
        path = os.path.join(build, f"libcapscan_interposer.{arch}.dylib")
        if not os.path.exists(path):
            check(False, f"missing {path}")
            continue
        slices = macho.parse(path)
        check(len(slices) == 1 and not macho.is_fat(path), f"{path}: thin file")
        thin[arch] = open(path, "rb").read()
        check_dylib_slice(check, slices[0], arch, path)
        check_interpose_binds(check, path, objdump)

    uni = os.path.join(build, "libcapscan_interposer.universal.dylib")
    if os.path.exists(uni):
        slices = macho.parse(uni)
        check(macho.is_fat(uni) and sorted(s.arch for s in slices) == sorted(DYLIB_ARCHS),
              f"{uni}: universal with {[s.arch for s in slices]}")
        for sl in slices:
            check(sl.data == thin.get(sl.arch), f"{uni}: {sl.arch} slice identical to the thin file")
            check_dylib_slice(check, sl, sl.arch, f"{uni}[{sl.arch}]")
    else:
        check(False, f"missing {uni}")

    probe = os.path.join(build, "capscan-probe")
    if os.path.exists(probe):
        slices = macho.parse(probe)
        check(sorted(s.arch for s in slices) == sorted(DYLIB_ARCHS), f"{probe}: archs {[s.arch for s in slices]}")
        for sl in slices:
            where = f"{probe}[{sl.arch}]"
            check(sl.filetype == macho.MH_EXECUTE and sl.has_main, f"{where}: executable with LC_MAIN")
            check(set(sl.dylibs) == {METAL, LIBOBJC, LIBSYSTEM, COREGRAPHICS}, f"{where}: dylibs {sl.dylibs}")
            check(sl.imports.get("_MTLCreateSystemDefaultDevice") == METAL, f"{where}: imports Metal device factory")
            # --kernels: the child and the host-proof sysctls, all from libSystem; no objc_msgSend
            for sym in PROBE_SYSTEM_IMPORTS:
                check(sl.imports.get(sym) == LIBSYSTEM, f"{where}: imports {sym} from libSystem")
            check("_objc_msgSend" not in sl.imports, f"{where}: no objc_msgSend")
            check(sl.minos == "13.0", f"{where}: minos {sl.minos}")
            ok, info = macho.verify_adhoc_signature(sl)
            check(ok, f"{where}: ad-hoc signature ({info})")
    else:
        check(False, f"missing {probe}")

    sums = os.path.join(build, "SHA256SUMS")
    if os.path.exists(sums):
        listed = {}
        for line in open(sums):
            digest, name = line.rstrip("\n").split("  ", 1)
            listed[name] = digest
        check(sorted(listed) == sorted(ARTIFACTS), f"SHA256SUMS lists {sorted(listed)}")
        for name, digest in listed.items():
            p = os.path.join(build, name)
            check(os.path.exists(p) and hashlib.sha256(open(p, "rb").read()).hexdigest() == digest,
                  f"SHA256SUMS matches {name}")
    else:
        check(False, f"missing {sums}")

    print(f"{check.passed} passed, {check.failed} failed")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
