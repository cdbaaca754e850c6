"""Log text made safe for a terminal: the one sanitizer.

Logs are hostile. A string that came from a log can carry escape sequences
(CSI ``ESC[2K`` erases a line, OSC 52 sets the clipboard, OSC 0 the window
title, DCS/APC/PM/SOS talk to the terminal itself), bare C0/C1 control
characters (``\\r`` and backspace overwrite what was shown, ``\\x9b`` is CSI on
terminals that read 8-bit controls), bidirectional overrides and isolates
(which reorder what the eye reads: ``U+202E``), and, from JSON ``\\ud800``
escapes, lone surrogates that no terminal or database can encode.

``clean`` removes the sequences whole (introducer, parameters and
terminator, whether ended by BEL, ``ESC \\`` or the 8-bit ST), drops every
other control and bidi character, turns a tab into a space and a lone
surrogate into U+FFFD. It is applied where log text enters capscan (the
normaliser and the parsers' JSON fields) and again where text leaves for a
terminal (the report's console, ``echo``, the TUI's data), so a database
written by an older capscan is shown safely too. ``--tee`` is the only output
that passes input through unchanged, by design.

Markup is a separate matter: cleaned text is still never handed to rich or
Textual as markup (see ``analyzer.output.report.console``).
"""

from __future__ import annotations

import re
from typing import Any


class _Pattern:
    """A regex compiled on its first use: every capscan command imports this module (the output
    boundary), and compiling its character classes up front cost more than a fifth of `capscan
    runs`' own start-up. After the first call, ``search``/``sub`` are the compiled pattern's own."""

    __slots__ = ("source", "search", "sub")

    def __init__(self, source: str) -> None:
        self.source = source

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.source)
        self.search, self.sub = compiled.search, compiled.sub
        return getattr(compiled, name)


# Bidirectional formatting characters: ALM, LRM, RLM, LRE/RLE/PDF/LRO/RLO, LRI/RLI/FSI/PDI.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# Any character that makes a string need cleaning (the fast check: most lines have none).
_SUSPECT = _Pattern(f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{BIDI}\\ud800-\\udfff]")
_SUSPECT_KEEP_NL = _Pattern(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029{BIDI}\\ud800-\\udfff]")

# ECMA-48 sequences, 7-bit (ESC ...) and 8-bit (C1) introducers alike.
_SEQUENCE = _Pattern(
    # OSC, DCS, SOS, PM, APC: a string up to BEL, ESC \ or ST (or the end: a terminal would swallow the rest)
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    # CSI: parameters, intermediates, final byte
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    # any other escape: intermediates and a final byte (ESC c, ESC 7, ESC ( B, ...)
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
_CONTROLS_KEEP_NL = _Pattern(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI}]")
_CONTROLS = _Pattern(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{BIDI}]")
_SURROGATE = _Pattern("[\\ud800-\\udfff]")


def clean(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with no escape sequence, control or bidi character left.

    A newline becomes a space (a log field is one line) unless ``keep_newlines``
    (rendered output, where the newlines are capscan's own)."""
    suspect = _SUSPECT_KEEP_NL if keep_newlines else _SUSPECT
    if suspect.search(text) is None:
        return text
    if "\x1b" in text or _has_c1_introducer(text):
        text = _SEQUENCE.sub("", text)
    text = text.replace("\t", " ").replace("\u2028", " ").replace("\u2029", " ")
    if not keep_newlines:
        text = text.replace("\n", " ")
    text = (_CONTROLS_KEEP_NL if keep_newlines else _CONTROLS).sub("", text)
    return _SURROGATE.sub("\ufffd", text)


def _has_c1_introducer(text: str) -> bool:
    return any(c in text for c in "\x90\x98\x9b\x9d\x9e\x9f")


def is_clean(text: str, *, keep_newlines: bool = False) -> bool:
    return (_SUSPECT_KEEP_NL if keep_newlines else _SUSPECT).search(text) is None


def clean_deep(value: Any) -> Any:
    """Every string inside dicts, lists and tuples cleaned (keys too); other values as they are."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_deep(k): clean_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_deep(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(clean_deep(v) for v in value)
    return value


# JSON output keeps log text as it was, but escaped: json.dumps escapes C0
# (ESC is \u001b); C1, bidi, line separators and lone surrogates it leaves raw
# when ensure_ascii is off, so they are escaped here. They can only occur
# inside JSON strings, where \uXXXX means the same character.
_JSON_RAW = _Pattern(f"[\\x7f-\\x9f\\u2028\\u2029{BIDI}\\ud800-\\udfff]")


def escape_json_text(dumped: str) -> str:
    """A json.dumps(..., ensure_ascii=False) result with every terminal-unsafe character as a \\u escape."""
    if (dumped.isascii() and "\x7f" not in dumped) or _JSON_RAW.search(dumped) is None:
        return dumped  # (ASCII text can hold only DEL of these: checked at C speed, not the regex's)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", dumped)


# The UTF-8 of every character _JSON_RAW matches starts with one of these bytes: DEL, C1 (C2 80-9F),
# ALM (D8 9C), the marks, separators, embeddings and isolates U+200E-U+2069 (E2 80 .., E2 81 ..); a lone
# surrogate has no UTF-8. A superset (single bytes: memchr finds them): text with none needs no escape.
_JSON_RAW_UTF8 = (b"\x7f", b"\xc2", b"\xd8", b"\xe2")


def escape_json_utf8(dumped: bytes) -> str:
    """``escape_json_text`` of UTF-8 JSON text (orjson's), decoded; whether any character needs it is
    asked of the bytes first, four memchr searches where the regex would read every character."""
    text = dumped.decode()
    if any(lead in dumped for lead in _JSON_RAW_UTF8):
        return escape_json_text(text)
    return text


_UNSAFE_CHAR = _Pattern(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029{BIDI}]")


def strip_unsafe_chars(text: str) -> str:
    """Only the characters a terminal acts on (ESC, other C0/C1 controls, bidi
    marks) removed, one by one: none of them takes a cell, so the text keeps
    its width (for a line already laid out, as in the TUI's last filter).
    What followed an ESC stays as plain, harmless text."""
    return _UNSAFE_CHAR.sub("", text) if _UNSAFE_CHAR.search(text) else text


# The ASCII bytes _OUTPUT_SUSPECT does not match: tab, newline and the printable characters.
_PLAIN_ASCII = b"\t\n" + bytes(range(0x20, 0x7f))
_OUTPUT_SUSPECT = _Pattern(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029{BIDI}\\ud800-\\udfff]")


# GitHub's runner takes a line as a workflow command when it starts with "::" once leading spaces are
# trimmed (TryParseV2), and the legacy "##[" anywhere in a line (TryParse). A word joiner (U+2060: no
# width, not whitespace to either parser) before the "::" or inside "##[" keeps such text inert.
_WORKFLOW_LINE = _Pattern(r"(?m)^([ \t]*)(?=::)")
WORD_JOINER = "\u2060"


def defuse_workflow_commands(text: str) -> str:
    """``text`` in which no line can be a GitHub workflow command (capscan's own annotations are written
    past this, see analyzer.cli.gha)."""
    if "::" in text:
        text = _WORKFLOW_LINE.sub(lambda m: m.group(1) + WORD_JOINER, text)
    return text.replace("##[", "##" + WORD_JOINER + "[") if "##[" in text else text


def clean_output(text: str) -> str:
    """Text on its way to stdout/stderr: ``clean`` that keeps the layout
    characters capscan writes itself (newline, tab, a CRLF line end), with no
    line that GitHub's runner would take as a workflow command."""
    text = defuse_workflow_commands(text)
    if (text.isascii() and not text.encode("ascii").translate(None, _PLAIN_ASCII)) \
            or _OUTPUT_SUSPECT.search(text) is None:
        return text  # ASCII text: deleting every harmless byte leaves the suspect ones (C speed, not the regex's)
    if "\r\n" in text:
        return "\r\n".join(clean_output(part) for part in text.split("\r\n"))
    return "\t".join(clean(part, keep_newlines=True) for part in text.split("\t"))


class SafeTextStream:
    """A text stream (sys.stdout, sys.stderr) through which nothing reaches the
    terminal uncleaned: every ``write`` goes through ``clean_output``. The
    CLI installs it around both streams, so every line it prints (click.echo,
    print, csv writers, error messages naming a path) is covered, whoever wrote
    the command. Everything else (``buffer`` for --tee's byte-exact passthrough,
    ``fileno``, ``isatty``, ``encoding``, ``flush``) is the wrapped stream's.
    ``unfiltered`` is for rich consoles, which clean their own output
    (``analyzer.output.safe_console``) and add style codes that must survive."""

    def __init__(self, stream: Any) -> None:
        self.unfiltered = stream

    def write(self, text: str) -> int:
        self.unfiltered.write(clean_output(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unfiltered, name)


def unfiltered(stream: Any) -> Any:
    """The stream under a SafeTextStream (for rich consoles), else the stream itself."""
    return stream.unfiltered if isinstance(stream, SafeTextStream) else stream
