"""A file written whole or not at all, the one way capscan replaces a file it was asked to write
(``export json --out``, ``export prometheus --out``, ``report --html``).

The text goes to a temporary file beside the target, created by ``tempfile.mkstemp``
(O_CREAT|O_EXCL|O_NOFOLLOW under a random name: a symlink planted in the folder is never followed,
unlike prometheus_client's guessable ``PATH.PID.THREAD``), is flushed to disk, and is renamed over
the target (a reader such as node_exporter never sees half a file). The file gets the mode a new
file would get under the user's umask (mkstemp's 0600 would hide a report or a textfile from the
collector's user), or the mode of the file it replaces."""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Any, Callable, TextIO


def _umask() -> int:
    # the only portable way to read the umask is to set it: briefly to 077, so a file another thread created
    # in that instant would be stricter, never looser
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def mode_for(path: str) -> int:
    """The permission bits ``path`` should end with: those of the regular file it replaces, else
    0666 less the umask (what ``open(path, "w")`` would give)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        return stat.S_IMODE(st.st_mode) & 0o777  # no set-id bit carried over to a file of ours
    return 0o666 & ~_umask()


def write_atomically(path: str, write_to: Callable[[TextIO], Any], *, prefix: str, suffix: str = "") -> Any:
    """Replace ``path`` with what ``write_to`` writes to a text handle (UTF-8), or leave it as it was;
    returns what ``write_to`` returned. OSError propagates; the temporary file is removed either way."""
    mode = mode_for(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode)
            got = write_to(fh)
            fh.flush()
            os.fsync(fh.fileno())  # the rename must not publish a file whose bytes are still in memory
        os.replace(tmp, path)
        tmp = ""
        return got
    finally:
        if tmp:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
