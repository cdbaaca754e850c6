"""Write small Mach-O files for the remedy tests (no toolchain needed).

Real linker output covers what lld can make (tests use native/interposer/
build/macos-fixtures); these cover what it cannot: a hardened-runtime signature
with entitlements, the restrict flag, an arm64e-only program, and a universal
library that claims an arm64e slice. They are laid out as <mach-o/loader.h>
and xnu's <kern/cs_blobs.h> say, but carry no code: for reading, never for
running.
"""

from __future__ import annotations

import plistlib
import struct
from pathlib import Path

CPU = {"arm64": (0x0100000C, 0), "arm64e": (0x0100000C, 0x80000002), "x86_64": (0x01000007, 3)}
MH_EXECUTE, MH_DYLIB = 2, 6


def _codedirectory(flags: int, ident: str, team: str | None) -> bytes:
    header = 88                                   # version 0x20400 layout
    ident_b = ident.encode() + b"\0"
    team_b = (team.encode() + b"\0") if team else b""
    ident_off = header
    team_off = header + len(ident_b) if team else 0
    length = header + len(ident_b) + len(team_b)
    body = struct.pack(">9I4BI", 0xFADE0C02, length, 0x20400, flags, length, ident_off, 0, 0, 0,
                       32, 2, 0, 12, 0)
    body += struct.pack(">II", 0, team_off)       # scatterOffset, teamOffset
    body += struct.pack(">IIQ", 0, 0, 0)          # spare3, (pad), codeLimit64
    body += struct.pack(">QQQ", 0, 0, 0)          # execSegBase, execSegLimit, execSegFlags
    body = body[:header].ljust(header, b"\0")
    return body + ident_b + team_b


def signature(flags: int, ident: str = "tool", team: str | None = None, entitlements: dict | None = None) -> bytes:
    blobs = [(0, _codedirectory(flags, ident, team))]
    if entitlements is not None:
        xml = plistlib.dumps(entitlements)
        blobs.append((5, struct.pack(">II", 0xFADE7171, 8 + len(xml)) + xml))
    head = 12 + 8 * len(blobs)
    index, payload, off = b"", b"", head
    for slot, blob in blobs:
        index += struct.pack(">II", slot, off)
        payload += blob
        off += len(blob)
    return struct.pack(">III", 0xFADE0CC0, off, len(blobs)) + index + payload


def thin(arch: str = "arm64", *, filetype: int = MH_EXECUTE, restrict: bool = False,
         sig: bytes | None = None, dylibs: tuple[str, ...] = ()) -> bytes:
    cputype, cpusubtype = CPU[arch]
    cmds = struct.pack("<II16sQQQQiiII", 0x19, 72, b"__TEXT", 0, 0x4000, 0, 0x4000, 5, 5, 0, 0)
    ncmds = 1
    for name in dylibs:  # LC_LOAD_DYLIB: struct dylib_command, the name after it, padded to 8
        raw = name.encode() + b"\0"
        raw += b"\0" * (-(24 + len(raw)) % 8)
        cmds += struct.pack("<IIIIII", 0xC, 24 + len(raw), 24, 2, 0x10000, 0x10000) + raw
        ncmds += 1
    if restrict:
        sect = struct.pack("<16s16sQQIIIIIIII", b"__restrict", b"__RESTRICT", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        cmds += struct.pack("<II16sQQQQiiII", 0x19, 72 + 80, b"__RESTRICT", 0x4000, 0, 0, 0, 1, 1, 1, 0) + sect
        ncmds += 1
    sig_cmd_at = None
    if sig is not None:
        sig_cmd_at = len(cmds)
        cmds += struct.pack("<IIII", 0x1D, 16, 0, 0)
        ncmds += 1
    header = struct.pack("<IiIIIIII", 0xFEEDFACF, cputype, cpusubtype, filetype, ncmds, len(cmds), 0, 0)
    data = bytearray(header + cmds)
    data += b"\0" * (0x1000 - len(data) % 0x1000)
    if sig is not None:
        dataoff = len(data)
        struct.pack_into("<II", data, 32 + sig_cmd_at + 8, dataoff, len(sig))
        data += sig
    return bytes(data)


def as_arm64e(slice_bytes: bytes) -> bytes:
    """The same slice labelled arm64e (cpusubtype ARM64E | PTRAUTH_ABI): for reading only."""
    data = bytearray(slice_bytes)
    struct.pack_into("<I", data, 8, CPU["arm64e"][1])
    return bytes(data)


def fat(*slices: bytes) -> bytes:
    align = 14
    out = bytearray(struct.pack(">II", 0xCAFEBABE, len(slices)))
    offset = 1 << align
    table, body = b"", bytearray()
    for s in slices:
        cputype, cpusubtype = struct.unpack_from("<iI", s, 4)
        table += struct.pack(">iIIII", cputype, cpusubtype, offset + len(body), len(s), align)
        body += s
        body += b"\0" * (-len(body) % (1 << align))
    out += table
    out += b"\0" * ((1 << align) - len(out))
    return bytes(out + body)


def write(path: Path, data: bytes, mode: int = 0o755) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def universal_library_with_arm64e(cross_built: Path, directory: Path) -> Path:
    """capscan's cross-built universal dylib plus an arm64e-labelled copy of its arm64 slice,
    with a SHA256SUMS beside it: what `make macos-native` produces, as far as preflight can tell."""
    import hashlib

    from analyzer.remedy import macho

    raw = cross_built.read_bytes()
    info = macho.read(cross_built)
    slices = {}
    n = struct.unpack_from(">I", raw, 4)[0]
    for i in range(n):
        _c, _s, off, size, _a = struct.unpack_from(">5I", raw, 8 + 20 * i)
        slices[info.slices[i].arch] = raw[off:off + size]
    data = fat(slices["x86_64"], slices["arm64"], as_arm64e(slices["arm64"]))
    directory.mkdir(parents=True, exist_ok=True)
    lib = write(directory / "libcapscan_interposer.dylib", data, 0o644)
    (directory / "SHA256SUMS").write_text(f"{hashlib.sha256(data).hexdigest()}  {lib.name}\n")
    return lib
