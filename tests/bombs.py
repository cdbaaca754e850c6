"""Build decompression bombs for the resource tests from a stream: a few MB
of gzip that expand to GiBs, written without ever compressing (or holding)
the expanded content.

Each block is deflated once with a full flush, which makes the compressed
bytes of every later copy identical (the dictionary is reset), so the member
is the first copy, then the second copy repeated, then the final empty block.
The CRC-32 of the whole is computed without the data: CRC-32 over a fixed
block is an affine map of the running CRC over GF(2), and repeating the
block N times is that map raised to the N-th power (square and multiply).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _affine(block: bytes) -> tuple[list[int], int]:
    """crc32(block, c) = A·c xor b: A by columns (the image of each bit), b."""
    b = zlib.crc32(block, 0)
    return [zlib.crc32(block, 1 << i) ^ b for i in range(32)], b


def _apply(m: tuple[list[int], int], c: int) -> int:
    cols, b = m
    out, i = b, 0
    while c:
        if c & 1:
            out ^= cols[i]
        c >>= 1
        i += 1
    return out


def _compose(outer: tuple[list[int], int], inner: tuple[list[int], int]) -> tuple[list[int], int]:
    """outer after inner: A_o·(A_i·c xor b_i) xor b_o."""
    cols, b = inner
    return [_apply(outer, col) ^ outer[1] for col in cols], _apply(outer, b)


def crc32_repeated(block: bytes, count: int) -> int:
    result: tuple[list[int], int] = ([1 << i for i in range(32)], 0)  # identity
    power = _affine(block)
    while count:
        if count & 1:
            result = _compose(power, result)
        power = _compose(power, power)
        count >>= 1
    return _apply(result, 0)


def write_gzip_bomb(path: Path, block: bytes, count: int) -> int:
    """A one-member gzip of ``block`` * ``count`` at ``path``; returns the expanded size."""
    assert count >= 2
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    again = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    assert comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH) == again  # steady state reached
    end = comp.flush(zlib.Z_FINISH)
    total = len(block) * count
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip header: deflate, no name, mtime 0
        f.write(first)
        f.write(again * (count - 1))
        f.write(end)
        f.write(struct.pack("<II", crc32_repeated(block, count), total & 0xFFFFFFFF))
    return total
