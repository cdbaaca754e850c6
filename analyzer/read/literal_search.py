"""Find the lines of a buffer that hold any of a set of literals.

Two engines give the same answer (the sorted start offsets of those lines):

- ``HyperscanSearch``: every literal at once, in one pass over the buffer
  (Hyperscan's literal compiler, through the ``hyperscan`` package: about
  600 MB/s on the prefilter's literal set, grep's own class of algorithm);
- ``PureSearch``: one C-speed pass per literal (glibc's ``memmem`` through
  ``ctypes`` where the C library is glibc, else ``bytes.find``), each pass
  skipping to the end of a line once it holds a hit.

``literal_search()`` picks Hyperscan when it imports and compiles on this
machine, else the pure one; ``CAPSCAN_PURE_SCAN=1`` in the environment forces
the pure one (the tests compare both on the same inputs).
"""

from __future__ import annotations

import os
from typing import Iterable

PURE_ENV = "CAPSCAN_PURE_SCAN"


def _load_memmem():
    """glibc's memmem, or None (other C libraries: their memmem can be a
    naive loop, slower than ``bytes.find``)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only
        fn = libc.memmem
        fn.restype = ctypes.c_void_p
        fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
        probe = b"xx ggml_metal yy \xc2\xb1 zz"
        keep = ctypes.c_char_p(probe)
        base = ctypes.cast(keep, ctypes.c_void_p).value
        for needle in (b"ggml_metal", b"\xc2\xb1", b"zz", b"absent"):
            got = fn(base, len(probe), needle, len(needle))
            if (got - base if got else -1) != probe.find(needle):
                return None
    except Exception:  # noqa: BLE001 - no ctypes, no libc symbol, another platform: fall back
        return None
    return fn, ctypes


_MEMMEM = _load_memmem()


class PureSearch:
    """One pass per literal; ``use_memmem=False`` keeps to ``bytes.find``."""

    def __init__(self, literals: Iterable[bytes], *, use_memmem: bool = True):
        self.literals = tuple(literals)
        self.use_memmem = use_memmem and _MEMMEM is not None
        self.name = "memmem" if self.use_memmem else "bytes.find"

    def line_starts(self, body: bytes, start: int = 0, end: int | None = None) -> list[int]:
        """Sorted start offsets of the lines of ``body[start:end]`` that contain a
        literal. ``start`` is a line start and ``end`` follows a newline."""
        if end is None:
            end = len(body)
        starts: set[int] = set()
        add = starts.add
        find, rfind = body.find, body.rfind
        if self.use_memmem and end - start > 4096:
            memmem, ctypes = _MEMMEM
            keep = ctypes.c_char_p(body)  # holds ``body`` alive; no copy
            base = ctypes.cast(keep, ctypes.c_void_p).value

            def lfind(lit: bytes, i: int) -> int:
                if end - i < len(lit):
                    return -1
                got = memmem(base + i, end - i, lit, len(lit))
                return got - base if got else -1
        else:
            def lfind(lit: bytes, i: int) -> int:
                return find(lit, i, end)

        for lit in self.literals:
            i = lfind(lit, start)
            while i != -1:
                ls = rfind(b"\n", start, i)
                add(start if ls < 0 else ls + 1)
                le = find(b"\n", i, end)
                if le == -1:
                    break
                i = lfind(lit, le)
        return sorted(starts)


class HyperscanSearch:
    """All literals in one Hyperscan pass. A range where hits crowd (more than
    one per ``CROWDED`` bytes: a hostile or a hit-dense input, where one
    Python callback per hit would cost more than the pure passes, which skip
    to the line's end after a hit) is handed to the pure search instead."""

    name = "hyperscan"
    CROWDED = 256

    def __init__(self, literals: Iterable[bytes]):
        import hyperscan

        self.literals = tuple(literals)
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        n = len(self.literals)
        db.compile(expressions=list(self.literals), ids=list(range(n)), elements=n, flags=0, literal=True)
        self._db = db
        self._scratch = hyperscan.Scratch(db)
        self._terminated = hyperscan.ScanTerminated
        self._pure = PureSearch(self.literals)

    def line_starts(self, body: bytes, start: int = 0, end: int | None = None) -> list[int]:
        if end is None:
            end = len(body)
        if start >= end:
            return []
        ends: list[int] = []
        append = ends.append
        limit = (end - start) // self.CROWDED + 64

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            append(to)
            return len(ends) > limit  # True stops the scan

        try:
            self._db.scan(memoryview(body)[start:end],  # type: ignore[type-var]  # hyperscan scans any buffer
 match_event_handler=on_match, scratch=self._scratch)
        except self._terminated:
            return self._pure.line_starts(body, start, end)
        ends.sort()
        out: list[int] = []
        find, rfind = body.find, body.rfind
        line_end = -1  # end (the newline) of the last line taken
        for to in ends:
            at = start + to - 1  # the last byte of the hit (a literal holds no newline)
            if at < line_end:
                continue
            ls = rfind(b"\n", start, at)
            out.append(start if ls < 0 else ls + 1)
            line_end = find(b"\n", at, end)
            if line_end == -1:
                break
        return out


def hyperscan_search(literals: Iterable[bytes]) -> HyperscanSearch | None:
    """Hyperscan for these literals, or None where it cannot be imported or
    does not run (no wheel for this platform, a CPU it does not support)."""
    try:
        return HyperscanSearch(literals)
    except Exception:  # noqa: BLE001 - ImportError, hyperscan.error (CPU features), anything else: fall back
        return None


def literal_search(literals: Iterable[bytes], *, pure: bool | None = None) -> HyperscanSearch | PureSearch:
    """The fastest engine available for ``literals``; ``pure=True`` (or the
    environment variable ``CAPSCAN_PURE_SCAN=1``) forces the pure one."""
    literals = tuple(literals)
    if pure is None:
        pure = os.environ.get(PURE_ENV, "") not in ("", "0")
    if not pure:
        engine = hyperscan_search(literals)
        if engine is not None:
            return engine
    return PureSearch(literals)
