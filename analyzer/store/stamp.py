"""The stamp of a diagnosis this installation stored: an HMAC, under a key kept outside any database,
over what the diagnosis says (run, verdict, fixable, environment, rules) and the run's stored facts.

A stored verdict is a claim (issue 37): a database handed over, or edited, can say fixable about any
run. Listings decide claims again with today's rules (analyzer.rules.today), which costs a diagnosis
per claim; a claim this installation stamped itself, on facts that have not changed since, was decided
by these rules already and is listed as stored. A database from elsewhere has no stamp this key
verifies, so each of its claims is decided again. Commands that act on a verdict (`remedy plan`) never
rely on a stamp: they diagnose their run again.

The key is ``stamp.key`` in capscan's user data directory (0600), created by the first command that
stores a diagnosis; never beside a --db file, which may be the shared folder the database came from.
"""

from __future__ import annotations

import hashlib
import hmac
import os

KEY_FILE = "stamp.key"
_CACHE: dict[str, bytes | None] = {}  # by path: a process (a test) may change its data directory


def key_path() -> str:
    import platformdirs  # (only where a stamp is made or checked)

    return os.path.join(platformdirs.user_data_dir("capscan"), KEY_FILE)


def key(create: bool) -> bytes | None:
    """This installation's key; None when there is none (and ``create`` is false) or it cannot be read
    or made (then nothing is stamped and every claim is decided again: slower, never wrong)."""
    path = key_path()
    if _CACHE.get(path) is not None or (path in _CACHE and not create):
        return _CACHE[path]
    value: bytes | None = None
    try:
        with open(path, "rb") as f:
            value = f.read(64)
    except FileNotFoundError:
        value = _make(path) if create else None
    except OSError:
        value = None
    if value is not None and len(value) < 32:
        value = None  # a truncated key stamps nothing
    _CACHE[path] = value
    return value


def _make(path: str) -> bytes | None:
    import secrets

    value = secrets.token_bytes(32)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another capscan made it first: use theirs
        try:
            with open(path, "rb") as f:
                return f.read(64)
        except OSError:
            return None
    except OSError:
        return None
    with os.fdopen(fd, "wb") as f:
        f.write(value)
    return value


def stamp(secret: bytes, run_id: object, verdict: object, fixable: object, environment: object,
          rules_version: object, facts: bytes | None) -> str:
    message = "\0".join(str(x) for x in ("capscan-diagnosis-1", run_id, verdict, fixable, environment,
                                         rules_version, hashlib.sha256(facts or b"").hexdigest()))
    return hmac.new(secret, message.encode("utf-8", "replace"), hashlib.sha256).hexdigest()


def verified(secret: bytes | None, run_id: object, verdict: object, fixable: object, environment: object,
             rules_version: object, facts: bytes | None, given: object) -> bool:
    if secret is None or not isinstance(given, str):
        return False
    return hmac.compare_digest(stamp(secret, run_id, verdict, fixable, environment, rules_version, facts), given)
