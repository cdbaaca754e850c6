"""A small Mach-O reader (stdlib only) for checking the cross-built artifacts.

Reads thin and universal (fat) files: header, load commands, sections,
linked dylibs, undefined symbols with the dylib each binds to (two-level
namespace), and verifies the page hashes of an ad-hoc code signature.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

FAT_MAGIC = 0xCAFEBABE
MH_MAGIC_64 = 0xFEEDFACF
CPU_NAMES = {0x0100000C: "arm64", 0x01000007: "x86_64"}
CPU_SUBTYPE_ARM64E = 2
MH_EXECUTE, MH_DYLIB = 2, 6
LC_SYMTAB, LC_LOAD_DYLIB, LC_ID_DYLIB = 0x2, 0xC, 0xD
LC_SEGMENT_64, LC_CODE_SIGNATURE, LC_BUILD_VERSION = 0x19, 0x1D, 0x32
LC_MAIN = 0x80000028
S_MOD_INIT_FUNC_POINTERS, S_INTERPOSING = 0x9, 0xD
PLATFORM_MACOS = 1


@dataclass
class Section:
    segment: str
    name: str
    addr: int
    size: int
    offset: int
    flags: int

    @property
    def type(self) -> int:
        return self.flags & 0xFF


@dataclass
class Slice:
    arch: str
    cpusubtype: int
    filetype: int
    flags: int
    data: bytes
    install_name: str | None = None
    dylibs: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    platform: int | None = None
    minos: str | None = None
    code_signature: tuple[int, int] | None = None
    has_main: bool = False
    imports: dict[str, str] = field(default_factory=dict)   # symbol -> dylib path
    exports: list[str] = field(default_factory=list)

    def section(self, segment: str, name: str) -> Section | None:
        for s in self.sections:
            if s.segment == segment and s.name == name:
                return s
        return None


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode()


def _version(v: int) -> str:
    return f"{v >> 16}.{(v >> 8) & 0xFF}" + (f".{v & 0xFF}" if v & 0xFF else "")


def parse_slice(data: bytes) -> Slice:
    magic, cputype, cpusubtype, filetype, ncmds, _size, flags, _res = struct.unpack_from("<8I", data, 0)
    if magic != MH_MAGIC_64:
        raise ValueError(f"not a 64-bit Mach-O (magic {magic:#x})")
    sl = Slice(CPU_NAMES.get(cputype, hex(cputype)), cpusubtype & 0xFFFFFF, filetype, flags, data)
    symtab = None
    off = 32
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<2I", data, off)
        if cmd in (LC_ID_DYLIB, LC_LOAD_DYLIB):
            (name_off,) = struct.unpack_from("<I", data, off + 8)
            name = _cstr(data[off + name_off: off + cmdsize])
            if cmd == LC_ID_DYLIB:
                sl.install_name = name
            else:
                sl.dylibs.append(name)
        elif cmd == LC_SEGMENT_64:
            nsects = struct.unpack_from("<I", data, off + 64)[0]
            for i in range(nsects):
                s = off + 72 + i * 80
                sect, seg = _cstr(data[s:s + 16]), _cstr(data[s + 16:s + 32])
                addr, size, offset = struct.unpack_from("<QQI", data, s + 32)
                (sflags,) = struct.unpack_from("<I", data, s + 64)
                sl.sections.append(Section(seg, sect, addr, size, offset, sflags))
        elif cmd == LC_BUILD_VERSION:
            platform, minos = struct.unpack_from("<2I", data, off + 8)
            sl.platform, sl.minos = platform, _version(minos)
        elif cmd == LC_CODE_SIGNATURE:
            sl.code_signature = struct.unpack_from("<2I", data, off + 8)
        elif cmd == LC_MAIN:
            sl.has_main = True
        elif cmd == LC_SYMTAB:
            symtab = struct.unpack_from("<4I", data, off + 8)
        off += cmdsize
    if symtab:
        symoff, nsyms, stroff, _strsize = symtab
        for i in range(nsyms):
            strx, ntype, nsect, ndesc, _value = struct.unpack_from("<IBBHQ", data, symoff + i * 16)
            name = _cstr(data[stroff + strx: stroff + strx + 256])
            external, kind = ntype & 0x01, ntype & 0x0E
            if external and kind == 0x0:          # N_UNDF: imported
                ordinal = (ndesc >> 8) & 0xFF
                lib = sl.dylibs[ordinal - 1] if 0 < ordinal <= len(sl.dylibs) else f"ordinal {ordinal}"
                sl.imports[name] = lib
            elif external and kind == 0xE and not ntype & 0xE0:   # N_SECT, not a stab
                sl.exports.append(name)
    return sl


def parse(path_or_bytes) -> list[Slice]:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else open(path_or_bytes, "rb").read()
    (magic,) = struct.unpack_from(">I", data, 0)
    if magic == FAT_MAGIC:
        (n,) = struct.unpack_from(">I", data, 4)
        out = []
        for i in range(n):
            _cpu, _sub, offset, size, _align = struct.unpack_from(">5I", data, 8 + i * 20)
            out.append(parse_slice(data[offset: offset + size]))
        return out
    return [parse_slice(data)]


def is_fat(path) -> bool:
    with open(path, "rb") as f:
        return struct.unpack(">I", f.read(4))[0] == FAT_MAGIC


def verify_adhoc_signature(sl: Slice) -> tuple[bool, str]:
    """Check the CodeDirectory's page hashes against the file's bytes."""
    if not sl.code_signature:
        return False, "no LC_CODE_SIGNATURE"
    dataoff, _datasize = sl.code_signature
    data = sl.data
    magic, _length, count = struct.unpack_from(">3I", data, dataoff)
    if magic != 0xFADE0CC0:
        return False, f"bad SuperBlob magic {magic:#x}"
    for i in range(count):
        btype, boff = struct.unpack_from(">2I", data, dataoff + 12 + i * 8)
        if btype != 0:           # CSSLOT_CODEDIRECTORY
            continue
        cd = dataoff + boff
        (cmagic, _len, version, flags, hash_off, _ident_off, _nspecial, ncode, code_limit,
         hash_size, hash_type, _plat, page_log2) = struct.unpack_from(">9I4B", data, cd)
        if cmagic != 0xFADE0C02:
            return False, f"bad CodeDirectory magic {cmagic:#x}"
        if hash_type != 2 or hash_size != 32:
            return False, f"unexpected hash type {hash_type}"
        page = 1 << page_log2
        bad = 0
        for n in range(ncode):
            chunk = data[n * page: min((n + 1) * page, code_limit)]
            want = data[cd + hash_off + n * 32: cd + hash_off + (n + 1) * 32]
            bad += hashlib.sha256(chunk).digest() != want
        adhoc = bool(flags & 0x2)
        info = f"CodeDirectory v{version:#x} flags={flags:#x} pages={ncode} bad_pages={bad}"
        return adhoc and bad == 0, info
    return False, "no CodeDirectory"
