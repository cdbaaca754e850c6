"""The output boundary's fast checks (ASCII text decided at C speed, not by the regex) decide
exactly as the regexes do: no unsafe character gets through, and clean text is left alone."""

from __future__ import annotations

import random

from analyzer import safe_text as st

ASCII = [chr(i) for i in range(0x80)] + ["\r\n"]
MIXED = ASCII + [chr(i) for i in range(0x80, 0xa0)] + ["\u2028", "\u2029", "\u202e", "\u2066", "\ud800", "é", "日"]


def _samples():
    rng = random.Random(13)
    for n in range(6000):
        pool = ASCII if n % 2 else MIXED
        yield "".join(rng.choice(pool) for _ in range(rng.randint(0, 10)))
    yield from ("", "plain text\n", "tab\tand\nnewline", "del\x7f", "esc\x1b[2K", "cr\r\n", "bell\x07")


def test_fast_checks_agree_with_the_regexes():
    for text in _samples():
        if text.isascii():
            assert (not text.encode("ascii").translate(None, st._PLAIN_ASCII)) == \
                (st._OUTPUT_SUSPECT.search(text) is None), repr(text)
            assert ("\x7f" not in text) == (st._JSON_RAW.search(text) is None), repr(text)


def test_output_and_json_escaping_leave_nothing_unsafe():
    for text in _samples():
        out = st.clean_output(text)
        assert st._OUTPUT_SUSPECT.search(out.replace("\r\n", "\n")) is None, repr(text)  # a CRLF line end stays
        if st._OUTPUT_SUSPECT.search(text) is None:
            assert out == text
        escaped = st.escape_json_text(text)
        assert st._JSON_RAW.search(escaped) is None, repr(text)
        if st._JSON_RAW.search(text) is None:
            assert escaped == text


def test_the_utf8_check_escapes_what_the_text_check_escapes():
    """escape_json_utf8 asks four lead bytes of the UTF-8 before the regex: every character the regex
    escapes (DEL, C1, ALM, the bidi marks, embeddings and isolates, U+2028/U+2029) has one of them."""
    every = [chr(c) for c in range(0x110000) if not 0xd800 <= c <= 0xdfff and st._JSON_RAW.search(chr(c))]
    assert len(every) == 1 + 32 + len(st.BIDI) + 2
    for c in every:
        assert st.escape_json_utf8(f'"a{c}b"'.encode()) == st.escape_json_text(f'"a{c}b"') != f'"a{c}b"'
    for text in _samples():
        if "\ud800" not in text:
            assert st.escape_json_utf8(text.encode()) == st.escape_json_text(text), repr(text)
