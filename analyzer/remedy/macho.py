"""Read what preflight needs from a Mach-O file, in-process (no Command Line Tools).

For each slice of a thin or universal (fat) file: the architecture (arm64e told
apart from arm64 by its cpusubtype), whether it has dyld's ``__RESTRICT,__restrict``
section (and the segment and name of every section), and its code signature: the
CodeDirectory flags (ad-hoc, linker-signed, hardened runtime, library validation,
restrict) and the XML entitlements.

``lipo``, ``otool`` and ``codesign`` are xcrun shims on a Mac without the Command
Line Tools (they fail, or open an install dialog); this reader is what preflight
relies on, and those tools are optional cross-checks. Reads are bounded: a
hostile or truncated file gives ``MachOError`` with one line of why, never a
traceback and never an unbounded read.

Layouts: <mach-o/loader.h>, <mach-o/fat.h>, and the code-signing blobs of
xnu's <kern/cs_blobs.h>.
"""

from __future__ import annotations

import plistlib
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
MAX_FAT_ARCHS = 16              # real files have 1-4; Java class files share FAT_MAGIC
MAX_LOAD_COMMANDS_BYTES = 1 << 20
MAX_SIGNATURE_BYTES = 4 << 20

CPU_ARCH_ABI64 = 0x01000000
CPU_TYPE_X86, CPU_TYPE_ARM = 7, 12
CPU_SUBTYPE_MASK = 0x00FFFFFF
CPU_SUBTYPE_ARM64E = 2
CPU_SUBTYPE_X86_64_H = 8
MH_EXECUTE, MH_DYLIB = 2, 6
SECTION_TYPE, S_INTERPOSING = 0xFF, 0x0D
LC_SEGMENT, LC_SEGMENT_64, LC_CODE_SIGNATURE = 0x1, 0x19, 0x1D
# the dylib commands (load, weak, reexport, lazy, upward): what a program links
LC_DYLIBS = frozenset({0xC, 0x80000018, 0x8000001F, 0x20, 0x80000023})

CSMAGIC_EMBEDDED_SIGNATURE = 0xFADE0CC0
CSMAGIC_CODEDIRECTORY = 0xFADE0C02
CSMAGIC_EMBEDDED_ENTITLEMENTS = 0xFADE7171
CSSLOT_CODEDIRECTORY, CSSLOT_ENTITLEMENTS = 0, 5
CS_ADHOC, CS_RESTRICT, CS_REQUIRE_LV = 0x2, 0x800, 0x2000
CS_RUNTIME, CS_LINKER_SIGNED = 0x10000, 0x20000

ALLOW_DYLD = "com.apple.security.cs.allow-dyld-environment-variables"
DISABLE_LV = "com.apple.security.cs.disable-library-validation"


class MachOError(Exception):
    """The file is not a Mach-O file capscan can read (the message says why)."""


@dataclass(frozen=True)
class Signature:
    flags: int
    identifier: str | None
    team_id: str | None
    entitlements: dict = field(default_factory=dict)   # XML entitlements, booleans and strings only

    @property
    def adhoc(self) -> bool:
        return bool(self.flags & CS_ADHOC)

    @property
    def linker_signed(self) -> bool:
        return bool(self.flags & CS_LINKER_SIGNED)

    @property
    def hardened_runtime(self) -> bool:
        return bool(self.flags & CS_RUNTIME)

    @property
    def library_validation(self) -> bool:
        return bool(self.flags & CS_REQUIRE_LV)

    @property
    def restrict(self) -> bool:
        return bool(self.flags & CS_RESTRICT)

    def entitled(self, key: str) -> bool:
        return self.entitlements.get(key) is True


@dataclass(frozen=True)
class Section:
    segment: str
    name: str
    size: int
    flags: int

    @property
    def type(self) -> int:
        return self.flags & SECTION_TYPE


@dataclass(frozen=True)
class Slice:
    arch: str
    cputype: int
    cpusubtype: int
    filetype: int
    restrict_section: bool         # __RESTRICT,__restrict: dyld ignores DYLD_* variables
    signature: Signature | None    # None: no LC_CODE_SIGNATURE (unsigned)
    signature_error: str | None = None
    sections: tuple[Section, ...] = ()
    dylibs: tuple[str, ...] = ()   # install names of the libraries it links, in load-command order

    def section(self, segment: str, name: str) -> Section | None:
        return next((s for s in self.sections if s.segment == segment and s.name == name), None)


@dataclass(frozen=True)
class MachO:
    path: str
    fat: bool
    slices: tuple[Slice, ...]

    @property
    def archs(self) -> list[str]:
        return [s.arch for s in self.slices]

    def slice(self, arch: str) -> Slice | None:
        return next((s for s in self.slices if s.arch == arch), None)

    def running_slice(self) -> Slice:
        """The slice an Apple-silicon Mac runs: arm64e, then arm64, then x86_64 (Rosetta)."""
        for arch in ("arm64e", "arm64", "x86_64", "x86_64h"):
            s = self.slice(arch)
            if s is not None:
                return s
        return self.slices[0]


def arch_name(cputype: int, cpusubtype: int) -> str:
    sub = cpusubtype & CPU_SUBTYPE_MASK
    if cputype == CPU_TYPE_ARM | CPU_ARCH_ABI64:
        return "arm64e" if sub == CPU_SUBTYPE_ARM64E else "arm64"
    if cputype == CPU_TYPE_X86 | CPU_ARCH_ABI64:
        return "x86_64h" if sub == CPU_SUBTYPE_X86_64_H else "x86_64"
    if cputype == CPU_TYPE_X86:
        return "i386"
    if cputype == CPU_TYPE_ARM:
        return "arm"
    return f"cputype {cputype:#x}"


def _read_at(f: BinaryIO, offset: int, size: int, what: str) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise MachOError(f"truncated: {what} at offset {offset} needs {size} bytes")
    return data


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _entitlements(blob: bytes) -> dict:
    try:
        doc = plistlib.loads(blob)
    except Exception:  # noqa: BLE001 - any malformed plist is "no readable entitlements"
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, (bool, str))}


def parse_signature(blob: bytes) -> Signature:
    """The embedded signature SuperBlob (big-endian) -> flags, identifier, team, entitlements."""
    if len(blob) < 12:
        raise MachOError("code signature too short")
    magic, length, count = struct.unpack_from(">3I", blob, 0)
    if magic != CSMAGIC_EMBEDDED_SIGNATURE:
        raise MachOError(f"code signature has magic {magic:#x}, not an embedded signature")
    if count > 64 or 12 + 8 * count > len(blob):
        raise MachOError("code signature index out of range")
    flags = None
    ident = team = None
    ents: dict = {}
    for i in range(count):
        slot, off = struct.unpack_from(">2I", blob, 12 + 8 * i)
        if off + 8 > len(blob):
            raise MachOError("code signature blob out of range")
        bmagic, blen = struct.unpack_from(">2I", blob, off)
        body = blob[off:off + blen]
        if slot == CSSLOT_CODEDIRECTORY and bmagic == CSMAGIC_CODEDIRECTORY and flags is None:
            if len(body) < 44:
                raise MachOError("CodeDirectory too short")
            version, flags, _hash_off, ident_off = struct.unpack_from(">4I", body, 8)
            if ident_off and ident_off < len(body):
                ident = _cstr(body[ident_off:ident_off + 256])
            if version >= 0x20200 and len(body) >= 52:
                (team_off,) = struct.unpack_from(">I", body, 48)
                if team_off and team_off < len(body):
                    team = _cstr(body[team_off:team_off + 64]) or None
        elif slot == CSSLOT_ENTITLEMENTS and bmagic == CSMAGIC_EMBEDDED_ENTITLEMENTS:
            ents = _entitlements(body[8:])
    if flags is None:
        raise MachOError("code signature has no CodeDirectory")
    return Signature(flags, ident, team, ents)


def _parse_slice(f: BinaryIO, base: int, size: int | None) -> Slice:
    head = _read_at(f, base, 28, "Mach-O header")
    (magic,) = struct.unpack_from("<I", head, 0)
    if magic not in (MH_MAGIC_64, MH_MAGIC):
        raise MachOError(f"not a Mach-O file (magic {magic:#010x})")
    cputype, cpusubtype, filetype, ncmds, sizeofcmds = struct.unpack_from("<iIIII", head, 4)
    cputype &= 0xFFFFFFFF
    is64 = magic == MH_MAGIC_64
    header_size = 32 if is64 else 28
    if sizeofcmds > MAX_LOAD_COMMANDS_BYTES or ncmds > sizeofcmds // 8 + 1:
        raise MachOError(f"implausible load commands ({ncmds} commands, {sizeofcmds} bytes)")
    cmds = _read_at(f, base + header_size, sizeofcmds, "load commands")
    restrict = False
    sections: list[Section] = []
    sig_loc: tuple[int, int] | None = None
    dylibs: list[str] = []
    off = 0
    for _ in range(ncmds):
        if off + 8 > len(cmds):
            raise MachOError("load commands run past their declared size")
        cmd, cmdsize = struct.unpack_from("<2I", cmds, off)
        if cmdsize < 8 or off + cmdsize > len(cmds):
            raise MachOError(f"load command {cmd:#x} has a bad size ({cmdsize})")
        if cmd in (LC_SEGMENT_64, LC_SEGMENT):
            seg_hdr, sect_size = (72, 80) if cmd == LC_SEGMENT_64 else (56, 68)
            if cmdsize < seg_hdr:
                raise MachOError("segment command too short")
            segname = _cstr(cmds[off + 8:off + 24])
            nsects = struct.unpack_from("<I", cmds, off + seg_hdr - 8)[0]
            if seg_hdr + nsects * sect_size > cmdsize:
                raise MachOError(f"segment {segname} lists more sections than it holds")
            for i in range(nsects):
                s = off + seg_hdr + i * sect_size
                sectname, in_seg = _cstr(cmds[s:s + 16]), _cstr(cmds[s + 16:s + 32])
                if cmd == LC_SEGMENT_64:
                    (sect_bytes,) = struct.unpack_from("<Q", cmds, s + 40)
                    (sect_flags,) = struct.unpack_from("<I", cmds, s + 64)
                else:
                    (sect_bytes,) = struct.unpack_from("<I", cmds, s + 36)
                    (sect_flags,) = struct.unpack_from("<I", cmds, s + 56)
                sections.append(Section(in_seg, sectname, sect_bytes, sect_flags))
                if in_seg == "__RESTRICT" and sectname == "__restrict":
                    restrict = True
        elif cmd == LC_CODE_SIGNATURE:
            if cmdsize < 16:
                raise MachOError("LC_CODE_SIGNATURE too short")
            sig_loc = struct.unpack_from("<2I", cmds, off + 8)
        elif cmd in LC_DYLIBS:
            if cmdsize < 24:
                raise MachOError(f"dylib command {cmd:#x} too short")
            (name_off,) = struct.unpack_from("<I", cmds, off + 8)
            if not 24 <= name_off < cmdsize:
                raise MachOError(f"dylib command {cmd:#x} names a library outside itself")
            dylibs.append(_cstr(cmds[off + name_off:off + cmdsize]))
        off += cmdsize
    signature, sig_error = None, None
    if sig_loc is not None:
        dataoff, datasize = sig_loc
        try:
            if datasize > MAX_SIGNATURE_BYTES or (size is not None and dataoff + datasize > size):
                raise MachOError("code signature lies outside the slice")
            signature = parse_signature(_read_at(f, base + dataoff, datasize, "code signature"))
        except MachOError as exc:
            sig_error = str(exc)
    return Slice(arch_name(cputype, cpusubtype), cputype, cpusubtype, filetype, restrict, signature, sig_error,
                 tuple(sections), tuple(dylibs))


def read(path: str | Path) -> MachO:
    """Parse a thin or universal Mach-O file. Raises MachOError (one line) when it is not one."""
    p = str(path)
    try:
        with open(p, "rb") as f:
            f.seek(0, 2)
            total = f.tell()
            if total < 8:
                raise MachOError("not a Mach-O file (shorter than a header)")
            (magic,) = struct.unpack(">I", _read_at(f, 0, 4, "magic"))
            if magic in (FAT_MAGIC, FAT_MAGIC_64):
                (n,) = struct.unpack(">I", _read_at(f, 4, 4, "fat header"))
                if not 0 < n <= MAX_FAT_ARCHS:
                    raise MachOError(f"not a universal Mach-O file ({n} architectures)")
                entry = 20 if magic == FAT_MAGIC else 32
                table = _read_at(f, 8, n * entry, "fat architecture table")
                slices = []
                for i in range(n):
                    if magic == FAT_MAGIC:
                        _cpu, _sub, offset, size, _align = struct.unpack_from(">5I", table, i * entry)
                    else:
                        _cpu, _sub, offset, size, _align, _res = struct.unpack_from(">2I2Q2I", table, i * entry)
                    if offset + size > total:
                        raise MachOError(f"slice {i} lies past the end of the file")
                    slices.append(_parse_slice(f, offset, size))
                return MachO(p, True, tuple(slices))
            (le_magic,) = struct.unpack("<I", _read_at(f, 0, 4, "magic"))
            if le_magic not in (MH_MAGIC_64, MH_MAGIC):
                raise MachOError(f"not a Mach-O file (magic {le_magic:#010x})")
            return MachO(p, False, (_parse_slice(f, 0, total),))
    except OSError as exc:
        raise MachOError(f"cannot read it ({exc.strerror or exc})") from None
    except struct.error as exc:
        raise MachOError(f"malformed ({exc})") from None
