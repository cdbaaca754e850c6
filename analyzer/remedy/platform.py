"""What this machine is, and how injection works on it (one place).

- macOS: ``DYLD_INSERT_LIBRARIES`` with a `make macos-native` build, else the prebuilt
  analyzer/_native/darwin/libcapscan_interposer.dylib (see analyzer.remedy.dylib).
- Linux: ``LD_PRELOAD`` with native/interposer/build/linux/libcapscan_interposer.so,
  the stand-in that hooks the fake Metal device (for tests; no real GPU).

Test hook: ``CAPSCAN_PLATFORM=darwin|linux`` (and ``CAPSCAN_MACHINE=arm64|x86_64``)
override detection. They are honoured here and nowhere else, so tests can drive
the macOS code paths on Linux with stand-in tools on PATH.
"""

from __future__ import annotations

import os
import platform as _platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from analyzer.remedy.runner import Runner

PLATFORM_ENV = "CAPSCAN_PLATFORM"
MACHINE_ENV = "CAPSCAN_MACHINE"
FAMILY_VAR = "CAPSCAN_METAL_APPLE_FAMILY_MAX"
ALIAS_FAMILY_VARS = ("LUME_METAL_APPLE_FAMILY_MAX", "TART_METAL_APPLE_FAMILY_MAX")
BANNER_NAME = "capscan-interposer"
TART_DYLIB = Path("/usr/local/lib/TartMetalCapabilities.dylib")
BRAND_ARGV = ["sysctl", "-n", "machdep.cpu.brand_string"]
HV_ARGV = ["sysctl", "-n", "kern.hv_vmm_present"]
BOOTARGS_ARGV = ["sysctl", "-n", "kern.bootargs"]
# Apple's arm64e processes load third-party arm64e code only with this boot-arg (whatever SIP says)
ARM64E_PREVIEW_ABI = "-arm64e_preview_abi"
CLT_ARGV = ["xcode-select", "-p"]


def system() -> str:
    forced = os.environ.get(PLATFORM_ENV, "").strip().lower()
    if forced:
        return forced
    return "darwin" if sys.platform == "darwin" else ("linux" if sys.platform.startswith("linux") else sys.platform)


def machine() -> str:
    forced = os.environ.get(MACHINE_ENV, "").strip()
    if forced:
        return forced
    m = _platform.machine().lower()
    return "arm64" if m in ("arm64", "aarch64") else m


@dataclass(frozen=True)
class Injection:
    system: str
    env_var: str        # DYLD_INSERT_LIBRARIES or LD_PRELOAD
    build_dir: str      # under native/interposer/build
    make_target: str    # how to build it on demand
    stand_in: bool      # True on Linux: the fake device only

    @property
    def loader(self) -> str:
        return "dyld" if self.system == "darwin" else "ld.so"


_INJECTION = {
    "darwin": Injection("darwin", "DYLD_INSERT_LIBRARIES", "macos-native", "macos-native", False),
    "linux": Injection("linux", "LD_PRELOAD", "linux", "linux", True),
}


def injection(sys_name: str | None = None) -> Injection | None:
    return _INJECTION.get(sys_name or system())


def all_injection_vars() -> tuple[str, ...]:
    return tuple(i.env_var for i in _INJECTION.values())


def stock_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with no shim injected and no interposer setting: what a stock run gets (the
    self-test's stock probe, the kernel check before anything is injected)."""
    drop = {*all_injection_vars(), FAMILY_VAR, *ALIAS_FAMILY_VARS, "CAPSCAN_INTERPOSER_VERBOSE",
            "CAPSCAN_INTERPOSER_SCRUB", "CAPSCAN_METAL_MAX_THREADGROUP_MEMORY"}
    return {k: v for k, v in env.items() if k not in drop}


def brand_string(runner: Runner) -> str | None:
    """`sysctl -n machdep.cpu.brand_string` on macOS ("Apple M1 Ultra (Virtual)" in a guest)."""
    if system() != "darwin":
        return None
    result = runner.run(BRAND_ARGV)
    text = result.stdout.strip()
    return text if result.ok and text else None


def boot_args(runner: Runner) -> str | None:
    """`sysctl -n kern.bootargs` on macOS (often empty), None when unreadable or not macOS."""
    if system() != "darwin":
        return None
    result = runner.run(BOOTARGS_ARGV)
    return result.stdout.strip() if result.ok else None


def arm64e_preview_abi(boot: str | None) -> bool:
    return bool(boot) and ARM64E_PREVIEW_ABI in (boot or "").split()


def is_guest_brand(brand: str | None) -> bool | None:
    if brand is None:
        return None
    return "(virtual)" in brand.lower()


def hv_vmm_present(runner: Runner) -> bool | None:
    """`sysctl -n kern.hv_vmm_present` on macOS: 1 inside a VM, 0 on bare metal, None when unreadable."""
    if system() != "darwin":
        return None
    result = runner.run(HV_ARGV)
    value = result.stdout.strip()
    return {"1": True, "0": False}.get(value) if result.ok else None


def is_guest(runner: Runner, brand: str | None = None) -> tuple[bool | None, str]:
    """(guest?, how it was told): kern.hv_vmm_present first, the brand string's "(Virtual)" as fallback."""
    hv = hv_vmm_present(runner)
    if hv is not None:
        return hv, f"kern.hv_vmm_present={int(hv)}"
    if brand is None:
        brand = brand_string(runner)
    by_brand = is_guest_brand(brand)
    return by_brand, (f"CPU brand string '{brand}'" if brand else "nothing readable")


def developer_tools(runner: Runner) -> bool:
    """True when the Command Line Tools (or Xcode) are installed: `xcode-select -p` names a directory.

    Without them /usr/bin/lipo, otool and friends are xcrun shims that fail or open an
    install dialog, so capscan never calls them then.
    """
    if system() != "darwin":
        return False
    result = runner.run(CLT_ARGV)
    path = result.stdout.strip()
    return result.ok and bool(path)
