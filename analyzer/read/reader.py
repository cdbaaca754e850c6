"""Open an input (a path, or ``-`` for stdin) and stream its bytes in chunks.

gzip is recognised by its magic bytes and decompressed on the fly. Inputs
that cannot be read (missing, a directory, unreadable, binary, a truncated
gzip) raise ``InputError`` with a one-line message. Size and sha256 are
computed over the (decompressed) content while it streams.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import queue
import stat
import sys
import tempfile
import threading
import zlib
from typing import BinaryIO, Callable, Iterator

CHUNK = 4 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_SNIFF = 4096  # bytes the encoding is judged on


def text_encoding(head: bytes) -> str | None:
    """The encoding of an input that is not UTF-8, judged from its first bytes: UTF-16 by its
    byte-order mark, or without one by its shape (nearly every other byte NUL, the other half
    printable: text of a Windows tool, PowerShell's ``>``). None for UTF-8 and for binary."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"  # the codec reads the mark and drops it
    sample = head[: _SNIFF - (min(len(head), _SNIFF) % 2)]
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even_nul = sample[0::2].count(0)
    odd_nul = sample[1::2].count(0)
    stray = pairs // 20  # the other byte of a code unit is NUL too in U+0100, U+0200 ... (a low surrogate's)
    if odd_nul >= 0.9 * pairs and even_nul <= stray:
        return "utf-16-le"
    if even_nul >= 0.9 * pairs and odd_nul <= stray:
        return "utf-16-be"
    return None


class InputError(Exception):
    """An input that cannot be read; str() is a one-line message."""


class PartialInputError(InputError):
    """The input was damaged part-way (a truncated gzip). The complete lines
    before the damage were stored (``result``); str() is a one-line message."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


class _GunzipStream:
    """gzip decoded with zlib, so that a truncated or corrupt stream still
    yields every complete line before the damage (``gzip.GzipFile`` loses the
    whole buffered read when the trailer is missing).

    Memory is bounded whatever the compression ratio: each step inflates at
    most ``size`` bytes (zlib's ``max_length``) and keeps the compressed input
    it did not consume for the next step, so a few MB of gzip that expand to
    4 GiB cost one chunk at a time.

    ``read`` returns data ending at a line boundary while the stream is
    healthy; when it turns out to be damaged, the unfinished last line is
    dropped (a line cut off mid-way is never parsed) and ``damage`` says why.
    Concatenated gzip members are decoded one after the other; zero bytes
    after the last member (the padding some tools write, which ``gzip -t`` and
    ``zcat`` accept) are ignored."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._d: "zlib._Decompress | None" = None  # the member being inflated; None between members
        self._pending = b""  # compressed bytes read but not yet given to a member
        self._padding = False  # zero bytes seen after the last member
        self._started = False
        self._tail = b""
        self._done = False
        self.damage: str | None = None
        self.tee: BinaryIO | None = None  # --tee: the compressed bytes, passed through as read

    def _fail(self, why: str, *, keep_tail: bool = False) -> None:
        self._done = True
        self.damage = why
        if not keep_tail:
            self._tail = b""  # the last line is cut off: never parse it

    def _inflate(self, size: int) -> bytes | None:
        """At most ``size`` decompressed bytes (possibly none), or None at the end."""
        if self._done:
            return None
        d = self._d
        if d is not None and d.unconsumed_tail:
            data = d.unconsumed_tail
        elif self._pending:
            data, self._pending = self._pending, b""
        else:
            data = self._raw.read(size)
            if data and self.tee is not None:
                self.tee.write(data)
                self.tee.flush()
            if not data:
                self._done = True
                if d is not None or not self._started:
                    self._fail("truncated gzip (compressed data ends early)")
                return None
        if d is None:
            if self._padding or data[:1] == b"\x00":
                if data.strip(b"\x00"):
                    self._fail("trailing garbage after the gzip data (ignored)", keep_tail=True)
                    return None
                self._padding = True
                return b""
            if self._started and not _GZIP_MAGIC.startswith(data[:2]):
                # not another member: what gzip calls "decompression OK, trailing garbage ignored"
                self._fail("trailing garbage after the gzip data (ignored)", keep_tail=True)
                return None
            d = self._d = zlib.decompressobj(31)
            self._started = True
        try:
            out = d.decompress(data, size)
        except zlib.error as exc:
            self._fail(f"corrupt gzip ({exc})")
            return None
        if d.eof:  # this member is complete; what follows is another member, padding or garbage
            self._pending = d.unused_data
            self._d = None
        return out

    def read(self, size: int = CHUNK) -> bytes:
        while True:
            out = self._inflate(size)
            if out is None:
                break
            if not out:
                continue
            buf = self._tail + out if self._tail else out
            nl = buf.rfind(b"\n")
            if nl == -1:
                self._tail = buf
                if len(buf) < size:
                    continue
                self._tail = b""
                return buf  # a very long line: the scanner skips and counts it
            self._tail = buf[nl + 1:]
            return buf[: nl + 1]
        tail, self._tail = self._tail, b""
        return tail

    def close(self) -> None:
        self._raw.close()


class _BackgroundSha256:
    """sha256 on the second core: hashlib releases the GIL on large buffers, so
    the content hash (for dedupe) costs the parsing thread nothing."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._thread: threading.Thread | None = None
        self._digest: str | None = None

    def update(self, chunk: bytes) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="capscan-sha256", daemon=True)
            self._thread.start()
        self._queue.put(chunk)

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._sha.update(chunk)

    def hexdigest(self) -> str:
        if self._digest is None:
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
            self._digest = self._sha.hexdigest()
        return self._digest


class Input:
    def __init__(self, path: str, stream: BinaryIO, *, keep_raw: bool = False, file: BinaryIO | None = None,
                 piped: bool = False, name: str | None = None):
        self.path = path
        # stdin: stored under a name said with --name (``name``), else one made from its runs after parsing
        self.piped = piped
        self.name = name
        self._stream = stream
        # A regular file: its size when opened, to notice it shrinking while it is read.
        self._file = file
        self._opened_size = _regular_size(file) if file is not None else None
        self.size = 0
        self._sha = _BackgroundSha256()
        # --keep-raw: the input, gzip-compressed as it streams, spooled to a temporary file past a few MB
        self._raw = zlib.compressobj(6, zlib.DEFLATED, 31) if keep_raw else None
        self._raw_spool = (tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115 - closed in close()
                           if keep_raw else None)
        # Set when the input was damaged part-way (a truncated gzip): the
        # complete lines before the damage were read; this says what happened.
        self.damage: str | None = None

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def raw_gzip(self) -> tuple[BinaryIO, int] | None:
        """--keep-raw: the gzip of the input read so far, as a file rewound to
        its start, and its length (read it in pieces: it can be large)."""
        spool = self._raw_spool
        if spool is None:
            return None
        if self._raw is not None:
            spool.seek(0, os.SEEK_END)
            spool.write(self._raw.flush())
            self._raw = None  # finished: the gzip trailer is written
        size = spool.seek(0, os.SEEK_END)
        spool.seek(0)
        return spool, size  # type: ignore[return-value]  # a SpooledTemporaryFile is a binary file

    def chunks(self, tee: BinaryIO | None = None) -> Iterator[bytes]:
        """The input's bytes as UTF-8: a UTF-8 byte-order mark is dropped, UTF-16 (with or
        without a mark) decoded on the fly; --tee and --keep-raw keep the bytes as read."""
        stream = self._stream
        first = True
        decoder: codecs.IncrementalDecoder | None = None
        sniffed = False
        if isinstance(stream, _GunzipStream):
            # --tee passes the input through byte for byte: a gzip stays compressed
            stream.tee, tee = tee, None
        # a pipe's bytes as they arrive (read1), not once 4 MiB have: a benchmark piped in is read, and its
        # status shown, while it runs
        read = getattr(stream, "read1", stream.read) if self.piped else stream.read
        try:
            while True:
                chunk = read(CHUNK)
                if not sniffed and chunk and len(chunk) < _SNIFF:
                    while len(chunk) < _SNIFF and (more := read(CHUNK)):
                        chunk += more  # a pipe's first reads can be short: judge on enough bytes
                raw = chunk
                if not sniffed:
                    sniffed = True
                    encoding = text_encoding(chunk[:_SNIFF])
                    if encoding is not None:
                        decoder = codecs.getincrementaldecoder(encoding)("replace")
                if decoder is not None:
                    chunk = decoder.decode(chunk, final=not chunk).encode("utf-8", "replace")
                    if not chunk and raw:
                        continue  # half a character: it completes with the next read
                if not chunk:
                    self._check_not_shrunk()
                    damage = getattr(stream, "damage", None)
                    if damage:
                        if first:
                            raise InputError(f"{self.path}: {damage}, nothing could be read")
                        self.damage = damage
                    return
                if first:
                    first = False
                    if b"\x00" in chunk[:65536]:
                        raise InputError(f"{self.path}: binary file (NUL bytes), not a text log")
                    if chunk.startswith(_UTF8_BOM):
                        chunk = chunk[len(_UTF8_BOM):]
                self.size += len(chunk)
                self._sha.update(chunk)
                if self._raw is not None and self._raw_spool is not None:
                    self._raw_spool.write(self._raw.compress(raw))
                if tee is not None:
                    tee.write(raw)
                    tee.flush()
                yield chunk
        except EOFError:
            raise InputError(f"{self.path}: truncated gzip (compressed data ends early)") from None
        except zlib.error as exc:
            raise InputError(f"{self.path}: corrupt gzip ({exc})") from None
        except IsADirectoryError:
            raise InputError(f"{self.path}: is a directory") from None
        except BrokenPipeError:
            raise  # --tee's reader went away (reading never raises EPIPE): exit 141, as for any output
        except OSError as exc:
            raise InputError(f"{self.path}: read error ({exc.strerror or exc})") from None

    def _check_not_shrunk(self) -> None:
        """A file cut short while capscan read it (a log rotated or truncated
        in place) is not a complete log: refuse it rather than store a part
        of it as if it were the whole."""
        if self._opened_size is None or self._file is None:
            return
        now = _regular_size(self._file)
        if now is not None and now < self._opened_size:
            raise InputError(f"{self.path}: the file was truncated while being read ({self._opened_size:,} bytes "
                             f"when opened, {now:,} at the end); nothing stored: read it again once it is complete")

    def close(self) -> None:
        if self._raw_spool is not None:
            self._raw_spool.close()
        try:
            self._stream.close()
        except OSError:
            pass


def _regular_size(f: BinaryIO) -> int | None:
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


class _TeeReader(io.RawIOBase):
    """--tee on stdin: a thread reads whatever has arrived and passes it through
    to ``sink`` at once (flushed), before and independently of everything after
    it (opening the store, parsing, a store waiting for a lock). The reading side
    gets the same bytes from a bounded queue, so a slow ingest holds at most
    ``depth`` chunks before the passthrough waits for it."""

    def __init__(self, source: BinaryIO, sink: BinaryIO, depth: int = 64):
        super().__init__()
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._pending = b""
        self._eof = False
        self._thread = threading.Thread(target=self._pump, args=(source, sink), name="capscan-tee", daemon=True)
        self._thread.start()

    def _pump(self, source: BinaryIO, sink: BinaryIO) -> None:
        # The file descriptors themselves where there are (sys.stdin and sys.stdout): a daemon thread
        # blocked in a buffered object's read or write holds its lock, and the interpreter, exiting on
        # Ctrl-C or an error while stdin is still open, aborts when it cannot take that lock to flush
        # ("Fatal Python error: _enter_buffered_busy", exit 134). The buffered objects hold nothing
        # yet: the pump starts before anything reads stdin, and --tee writes nothing else to stdout.
        read = _raw_read(source)
        if read is None:
            read = getattr(source, "read1", source.read)
        write = _raw_write(sink)
        try:
            while True:
                chunk = read(1 << 16)
                if chunk:
                    if write is not None:
                        write(chunk)
                    else:
                        sink.write(chunk)
                        sink.flush()
                self._queue.put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reading side (e.g. BrokenPipeError)
            self._queue.put(exc)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self._pending and not self._eof:
            item = self._queue.get()
            if isinstance(item, BaseException):
                self._eof = True
                raise item
            self._pending = item
            self._eof = not item
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _fd_of(stream: BinaryIO, buffered: type) -> int | None:
    """The descriptor under a buffered stdin/stdout, when it is one (a test's BytesIO is not)."""
    if not isinstance(stream, buffered) or not isinstance(getattr(stream, "raw", None), io.FileIO):
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError):
        return None


def _raw_read(source: BinaryIO) -> Callable[[int], bytes] | None:
    fd = _fd_of(source, io.BufferedReader)
    return None if fd is None else (lambda n: os.read(fd, n))


def _raw_write(sink: BinaryIO) -> Callable[[bytes], None] | None:
    fd = _fd_of(sink, io.BufferedWriter)
    if fd is None:
        return None
    sink.flush()

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return write


def _maybe_gunzip(stream: io.BufferedReader) -> BinaryIO:
    head = stream.peek(2)[:2]
    if head == _GZIP_MAGIC:
        return _GunzipStream(stream)  # type: ignore[return-value]
    return stream


def open_input(path: str, *, keep_raw: bool = False, tee: BinaryIO | None = None, name: str | None = None) -> Input:
    """Open a path, or ``-`` for stdin. ``tee`` (stdin only): pass every byte through
    to it as soon as it arrives, from now on (see _TeeReader). ``name`` (stdin only):
    what to store it as (``--name``)."""
    if path == "-":
        raw = sys.stdin.buffer
        if tee is not None:
            raw = _TeeReader(raw, tee)
        stream = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
        return Input("<stdin>", _maybe_gunzip(stream), keep_raw=keep_raw,  # type: ignore[arg-type]
                     piped=True, name=name)
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory")
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed by Input.close
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    return Input(path, _maybe_gunzip(stream), keep_raw=keep_raw, file=stream)
