"""Forms in which real logs arrive that are not the program's own lines (issue 22, item 2): log
text kept inside JSON string values, UTF-8 byte-order marks and UTF-16 files, docker compose
prefixes. Each fixture in tests/fixtures/forms/ (README.md there says where each came from) is
read by the real pipeline into a real SQLite file and diagnosed."""

from __future__ import annotations

import codecs
import io
from pathlib import Path

import pytest

from analyzer.read.normalize import STRING_BUDGET, normalize, normalize_numbered
from analyzer.read.reader import Input, text_encoding
from tests.rules.test_shapes import diagnosed as _diagnosed

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "forms"
STOCK = dict(verdict="capability-downgrade", environment="vm", device="Apple Paravirtual device",
             families=[1005, 3003], throughput=[("pp512", 431.86), ("tg128", 12.63)])
PROBE = dict(verdict="capability-downgrade", environment="vm", device="Apple Paravirtual device",
             families=[1001, 1002, 1003, 1004, 1005, 2002, 3001, 3002, 3003], throughput=[])

# file -> per run (in file order): verdict, environment, device, families, throughput
CASES: dict[str, list[dict]] = {
    # log text inside JSON strings: a CI artifact's pretty "stderr_tail", a wrapper's compact
    # {"stderr": ...} records (one a line), a value with \r\n and \u001b colour escapes
    "json-ci-artifact-stderr-tail.json": [STOCK],
    "json-wrapper-compact.jsonl": [dict(verdict="healthy", environment="bare-metal", device="Apple M1 Ultra",
                                        families=[1007, 3003, 5002], throughput=[("pp512", 4871.99), ("tg128", 286.71)])],
    "json-escaped-ansi-crlf.json": [dict(verdict="capability-downgrade", environment="vm",
                                         device="Apple Paravirtual device", families=[3003], throughput=[])],
    # a UTF-8 byte-order mark before a probe, and again where a second file was concatenated
    "utf8-bom-probe.txt": [PROBE],
    "utf8-bom-concatenated.log": [PROBE, STOCK],
    # UTF-16: PowerShell's `>` (LE with a mark, CRLF), without a mark, big-endian with a mark
    "utf16le-bom-powershell.log": [STOCK],
    "utf16le-no-bom.log": [STOCK],
    "utf16be-bom.log": [STOCK],
    # docker compose: v2 "<service>-<n>  | ", v1 "<service>_<n>  | ", coloured, with `logs -t` times
    "compose-v2-probe.log": [PROBE],
    # (JSON alone: its tg is 1% of the M1 Ultra's bandwidth ceiling, the clamped guest's speed)
    "compose-v1-colour-bench-json.log": [dict(verdict="capability-downgrade", environment="vm", device="Apple Paravirtual device",
                                              families=[], throughput=[("pp512", 431.86), ("tg128", 12.63)])],
    "compose-v2-bench-csv.log": [dict(verdict="healthy", environment="bare-metal", device="Apple M1 Ultra", families=[],
                                      throughput=[("pp512", 517.88), ("tg128", 52.38)])],
    "compose-v2-colour-venus.log": [dict(verdict="healthy", environment="vm", device="Virtio-GPU Venus (Apple M1 Max)",
                                         families=[], throughput=[("prompt", 410.4), ("generation", 77.45)])],
    "compose-v2-timestamps-llvmpipe.log": [dict(verdict="no-gpu-offload", environment=None,
                                                device="llvmpipe (LLVM 20.1.8, 128 bits)", families=[],
                                                throughput=[("prompt", 2.51), ("generation", 2.3)])],
}


def _runs(tmp_path: Path, name: str) -> list[dict]:
    runs, rows = _diagnosed(tmp_path, name)
    return [dict(verdict=r.diagnosis.verdict, environment=r.diagnosis.environment, device=r.facts.device.name,
                 families=r.facts.device.families, throughput=[(t, round(s, 2)) for t, s in rows[r.id]])
            for r in runs]


@pytest.fixture(autouse=True)
def _forms_folder(monkeypatch):
    import tests.rules.test_shapes as shapes
    monkeypatch.setattr(shapes, "FIX", FIX)


@pytest.mark.parametrize("name", sorted(CASES))
def test_form(tmp_path, name):
    assert _runs(tmp_path, name) == CASES[name]


def test_every_form_fixture_has_a_case():
    assert {p.name for p in FIX.iterdir() if p.is_file() and p.name != "README.md"} == set(CASES)


def test_compose_look_alikes_are_left_alone():
    # a markdown row, a service name without its replica number, a table cell that is a name
    for line in ("| llama-1 | 12.63 |", "web  | build: ee3d1b54c (10167)", "llama-1 |x"):
        assert normalize(line) == ([line], None)


TEXT = "ggml_metal_device_init: GPU name:   MTL0 (Apple M2 Max)\r\nbuild: ee3d1b54c (10167) \u00e9\U0001f600\n"


class _Trickle(io.RawIOBase):
    """A stream that hands out ``step`` bytes a read (a pipe): characters are cut across reads."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step = data, step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        out, self.data = self.data[:self.step], self.data[self.step:]
        return out


@pytest.mark.parametrize("step", [1, 3, 4096])
@pytest.mark.parametrize("data", [codecs.BOM_UTF8 + TEXT.encode(), codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),
                                  TEXT.encode("utf-16-le"), codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
                                  TEXT.encode("utf-16-be")], ids=["utf8-bom", "le-bom", "le", "be-bom", "be"])
def test_decoded_as_utf8_whatever_the_reads(data, step):
    src = Input("x", _Trickle(data, step))  # type: ignore[arg-type]
    assert b"".join(src.chunks()) == TEXT.encode()


def test_keep_raw_and_tee_keep_the_bytes_as_read():
    data = codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le")
    tee = io.BytesIO()
    src = Input("x", io.BytesIO(data), keep_raw=True)
    assert b"".join(src.chunks(tee=tee)) == TEXT.encode()
    assert tee.getvalue() == data
    import gzip
    raw = src.raw_gzip()
    assert raw is not None and gzip.decompress(raw[0].read()) == data


@pytest.mark.parametrize("head", [b"\x00\x01\x02\x03" * 64, b"PK\x03\x04" + b"\x00" * 60, b"a\x00b", b"", b"ab"])
def test_binary_and_utf8_are_not_utf16(head):
    assert text_encoding(head) is None


def test_binary_is_still_refused():
    from analyzer.read.reader import InputError
    with pytest.raises(InputError, match="binary"):
        list(Input("x", io.BytesIO(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 100)).chunks())
    # UTF-16 whose text holds NUL characters is binary too
    with pytest.raises(InputError, match="binary"):
        list(Input("x", io.BytesIO(codecs.BOM_UTF16_LE + "ab\x00\x00cd".encode("utf-16-le"))).chunks())


def test_embedded_lines_keep_the_record_line_number(tmp_path):
    from tests.ingest_util import ingest_bytes, stored_runs

    data = (FIX / "json-ci-artifact-stderr-tail.json").read_bytes()
    at = next(i for i, line in enumerate(data.splitlines(), 1) if b'"stderr_tail"' in line)
    result = ingest_bytes(tmp_path / "j.db", data, name="artifact.json")
    (run,) = stored_runs(tmp_path / "j.db", result.run_ids)
    assert {row[-1] for row in run["throughput"]} == {at}
    assert run["evidence"] and {ev.line for ev in run["evidence"]} == {at}


def test_embedded_lines_are_unescaped_and_split():
    line = ('  "stderr": "main: build = 3428 (2f4a3aa5)\\r\\n\\u001b[32mggml_metal_init: GPU name:   Apple M2 Max'
            '\\u001b[0m\\nggml_metal_init: GPU family: MTLGPUFamilyApple8  (1008)\\n",')
    assert normalize(line) == (["main: build = 3428 (2f4a3aa5)", "ggml_metal_init: GPU name:   Apple M2 Max",
                                "ggml_metal_init: GPU family: MTLGPUFamilyApple8  (1008)"], None)


def test_embedded_lines_keep_their_number_inside_the_string():
    # blank lines count (a person counting the decoded string counts them), a second string's lines go on
    # from the first's, so each stays distinct on one physical line; a plain line has none
    line = ('{"stderr": "main: build = 3428 (2f4a3aa5)\\n\\n  \\nggml_metal_init: GPU name:   Apple M2 Max\\n", '
            '"tail": "build: 1 (x)\\nllama_perf_context_print: eval time\\n"}')
    assert normalize_numbered(line) == ([(1, "main: build = 3428 (2f4a3aa5)"), (4, "ggml_metal_init: GPU name:   Apple M2 Max"),
                                         (5, "build: 1 (x)"), (6, "llama_perf_context_print: eval time")], None)
    assert normalize_numbered("ggml_metal_init: GPU name:   Apple M2 Max") == (
        [(None, "ggml_metal_init: GPU name:   Apple M2 Max")], None)
    # a JSON-lines callback of one line is that line itself; of several, each numbered
    assert normalize_numbered('{"level": "info", "text": "ggml_metal_init: GPU name:   Apple M2 Max"}')[0] == [
        (None, "ggml_metal_init: GPU name:   Apple M2 Max")]
    assert normalize_numbered('{"text": "main: build = 1 (a)\\nggml_metal_init: GPU name:   X"}')[0] == [
        (1, "main: build = 1 (a)"), (2, "ggml_metal_init: GPU name:   X")]


def test_strings_without_log_lines_and_log_lines_quoting_strings_stay_themselves():
    for line in ('{"prompt": "Hello\\nworld\\n", "n_predict": 8}',
                 'llama_model_loader: - kv  21:  tokenizer.chat_template str  = "{% for m %}\\nsystem: x\\n"',
                 '"content": "a: \\"broken\\n'):
        assert normalize(line) == ([line], None)


def test_a_value_over_the_budget_is_read_up_to_it():
    head = "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\\n"
    filler = "x" * 60 + "\\n"
    line = '{"stderr": "' + head + filler * (STRING_BUDGET // len(filler) + 10) + 'build: 1 (tail)\\n"}'
    texts, _ = normalize(line)
    assert texts[0] == "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)"
    assert "build: 1 (tail)" not in texts and len(texts) <= STRING_BUDGET // len(filler) + 1


def test_hostile_strings_stay_themselves():
    """Strings of backslashes and escaped newlines and quotes that open no log line are the line itself, at
    200 KB as at 20. How their cost grows is measured by bench/linearity.py (``hostile string`` cases), not
    here: a timing ratio fails on a busy machine (issue 39)."""
    for make in (lambda n: '["' + "\\" * n + '\\n', lambda n: '{"a": "' + '\\n\\"' * (n // 2) + '"}',
                 lambda n: '"' + '"\\n' * (n // 2)):
        for size in (20_000, 200_000):
            line = make(size)
            assert normalize(line) == ([line], None), size
