"""`capscan remedy selftest --bundle FILE` on the Linux stand-in: every hypothesis recorded (the Mac-only
ones as not-run-here), the file valid against `capscan schema --for bundle`, redacted (a planted user
and host name), and read back by `capscan ingest` as runs with their diagnoses; the committed bundle
fixture (tests/fixtures/bundles/) ingested the same way."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from conftest import FIXTURES, REPO

USER, HOST = "plantuser", "planted-mac"
MAC_ONLY = {"framework-python", "host-default", "test-backend-ops.MUL_MAT", "test-backend-ops.FLASH_ATTN_EXT",
            "test-backend-ops.SOFT_MAX"}


def _schema(env) -> Draft202012Validator:
    r = env.capscan("schema", "--for", "bundle")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    Draft202012Validator.check_schema(schema)
    assert schema["title"] == "Bundle"
    return Draft202012Validator(schema)


def _planted(env, linux_build: Path, tmp_path: Path) -> tuple[Path, dict[str, str], list[str]]:
    """A user plantuser on a Mac called planted-mac: their home, a llama-bench under it, a model named after the
    machine, and `hostname` saying so."""
    home = tmp_path / "Users" / USER
    exe = home / "llama.cpp" / "build" / "bin" / "llama-bench"
    exe.parent.mkdir(parents=True)
    shutil.copy(linux_build / "fake-llama", exe)
    shutil.copy(linux_build / "libfakemetal.so", exe.parent)   # fake-llama's Metal, found beside it
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "hostname").write_text(f"#!/bin/sh\necho {HOST}.local\n")
    (tools / "hostname").chmod(0o755)
    extra = {"HOME": str(home), "USER": USER, "LOGNAME": USER, "PATH": f"{tools}:{env.vars['PATH']}"}
    return home, extra, ["--llama-bench", str(exe), "-m", f"{home}/models/{HOST}.gguf"]


def test_the_bundle_end_to_end_on_the_stand_in(env, linux_build, tmp_path):
    home, extra, bench = _planted(env, linux_build, tmp_path)
    out = tmp_path / "bundle.json"
    r = env.capscan("remedy", "selftest", "--bundle", str(out), *bench, **extra)
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    doc = json.loads(text)
    assert list(doc)[:3] == ["capscan_version", "bundle", "bundle_version"]   # what ingest sniffs
    assert _schema(env).is_valid(doc), [e.message for e in _schema(env).iter_errors(doc)][:3]
    from analyzer.output.bundle import Bundle

    Bundle.model_validate(doc)   # strictly: every key is the model's
    assert doc["machine"]["stand_in"] is True and doc["verdict"] == "works" and doc["redacted"] is True
    status = {h["name"]: h for h in doc["hypotheses"]}
    assert {k: h["status"] for k, h in status.items()} == {
        "library-hooks": "pass", "kernels-stock": "pass", "kernels-injected": "pass",
        "remedy-run-llama-bench": "pass", **dict.fromkeys(MAC_ONLY, "not-run-here")}
    for name in MAC_ONLY:
        assert "only macOS can settle this" in status[name]["why"]
    assert "from -[_MTLDevice initGPUFamilySupport]" in status["library-hooks"]["actual"]
    stable = status["kernels-stock"]
    assert len(stable["timings_ms"]) == 10 and stable["actual"].startswith("10 runs: ")
    assert "(11.08x)" in status["remedy-run-llama-bench"]["actual"]
    assert "remedied: simdgroup_reduction=true, simdgroup_mm=true" in status["remedy-run-llama-bench"]["actual"]
    assert "SIP: n/a" in status["remedy-run-llama-bench"]["claim"]
    assert [lg["label"] for lg in doc["logs"]] == ["stock probe", "capscan probe", "kernels stock",
                                                  "llama-bench stock", "llama-bench capscan"]
    # redacted: the planted user, their home and the machine's name appear nowhere, logs included
    for secret in (USER, HOST, str(home), str(REPO)):
        assert secret not in text, secret
    assert "~/llama.cpp/build/bin/llama-bench" in text and "<host>.gguf" in text
    human = r.stdout.decode()
    assert f"bundle: {out}" in human and "  not-run-here framework-python (only macOS" in human

    # read back (in another store, as a maintainer would): each log a source, its runs diagnosed; the stock and
    # remedied llama-bench runs as they ran
    other = str(tmp_path / "maintainer.db")
    got = env.capscan("ingest", "--json", str(out), CAPSCAN_DB=other)
    assert got.returncode == 0, got.stderr.decode()
    assert "a capscan export (capscan-bundle)" in got.stderr.decode()
    con = sqlite3.connect(other)
    sources = [p for (p,) in con.execute("SELECT path FROM sources ORDER BY id")]
    assert f"{out} [llama-bench stock]" in sources and f"{out} [capscan probe]" in sources
    ids = [rid for item in json.loads(got.stdout) for rid in item["run_ids"]]
    verdicts = {}
    for rid in ids:
        shown = json.loads(env.capscan("show", "--json", str(rid), CAPSCAN_DB=other).stdout)
        verdicts.setdefault(shown["source"].rsplit("[", 1)[-1].rstrip("]"), []).append(shown["verdict"])
    assert verdicts["llama-bench stock"][-1] == "capability-downgrade"
    assert verdicts["llama-bench capscan"][-1] == "healthy"


def test_no_redact_keeps_the_names(env, linux_build, tmp_path):
    home, extra, bench = _planted(env, linux_build, tmp_path)
    out = tmp_path / "bundle.json"
    r = env.capscan("remedy", "selftest", "--bundle", str(out), "--no-redact", *bench, **extra)
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    assert json.loads(text)["redacted"] is False
    assert f"{home}/models/{HOST}.gguf" in text and str(REPO) not in text   # capscan's own paths say nothing


def test_bundle_options_need_a_bundle(env, tmp_path):
    r = env.capscan("remedy", "selftest", "--llama-build", "/nonexistent")
    assert r.returncode == 2 and b"go with --bundle FILE" in r.stderr and b"Traceback" not in r.stderr
    r = env.capscan("remedy", "selftest", "--bundle", str(tmp_path / "no" / "such" / "b.json"))
    assert r.returncode == 2 and b"cannot write the bundle (no such directory)" in r.stderr
    assert not env.db.exists()   # refused before anything ran


def test_test_backend_ops_under_the_library(env, linux_build, tmp_path):
    """--llama-build DIR: its test-backend-ops runs per op with the library injected; a FAIL line is a fail."""
    build = tmp_path / "llama.cpp" / "build"
    (build / "bin").mkdir(parents=True)
    ops = build / "bin" / "test-backend-ops"
    # passes MUL_MAT and SOFT_MAX (when the library is there), fails one FLASH_ATTN_EXT case
    ops.write_text("#!/bin/sh\n"
                   "[ -n \"$CAPSCAN_METAL_APPLE_FAMILY_MAX\" ] || { echo 'no library' >&2; exit 3; }\n"
                   "echo 'Testing 2 devices'\n"
                   "if [ \"$2\" = FLASH_ATTN_EXT ]; then\n"
                   "  echo '  FLASH_ATTN_EXT(hsk=64,hsv=64,nh=4,kv=512,nb=1,mask=1,max_bias=0.000000): [FLASH_ATTN_EXT] "
                   "NMSE = 0.031 > 0.000500 FAIL'\n  echo '  412/413 tests passed'\n  echo '  Backend Metal: FAIL'\n"
                   "  exit 1\nfi\n"
                   "echo \"  $2(type_a=f16,type_b=f32,m=16,n=1,k=256): OK\"\necho '  1021/1021 tests passed'\n"
                   "echo '  Backend Metal: OK'\n")
    ops.chmod(0o755)
    out = tmp_path / "b.json"
    r = env.capscan("remedy", "selftest", "--bundle", str(out), "--llama-build", str(build))
    assert r.returncode == 0, r.stderr.decode()
    h = {x["name"]: x for x in json.loads(out.read_text())["hypotheses"]}
    assert h["test-backend-ops.MUL_MAT"]["status"] == "pass"
    assert h["test-backend-ops.SOFT_MAX"]["status"] == "pass"
    assert "1021/1021 tests passed" in h["test-backend-ops.SOFT_MAX"]["actual"]
    fa = h["test-backend-ops.FLASH_ATTN_EXT"]
    assert fa["status"] == "fail" and "NMSE = 0.031" in fa["why"]
    assert fa["command"][0].endswith("/llama.cpp/build/bin/test-backend-ops")
    assert fa["command"][1:] == ["-o", "FLASH_ATTN_EXT"]
    assert "Linux stand-in: no Metal backend here" in fa["claim"]
    # a llama.cpp build without the tool is an error, not a pass
    empty = tmp_path / "empty"
    empty.mkdir()
    env.capscan("remedy", "selftest", "--bundle", str(out), "--llama-build", str(empty))
    h = {x["name"]: x for x in json.loads(out.read_text())["hypotheses"]}
    assert h["test-backend-ops.MUL_MAT"]["status"] == "error" and "no test-backend-ops under" in \
        h["test-backend-ops.MUL_MAT"]["why"]


BUNDLE_FIXTURE = FIXTURES / "bundles" / "stand-in-works.json"


def test_the_committed_bundle_is_read_back_as_runs(env):
    """A bundle as a user attaches it to an issue (this one made on the stand-in): `capscan ingest` stores
    the logs inside and diagnoses them; a second ingest adds nothing."""
    doc = json.loads(BUNDLE_FIXTURE.read_text())
    assert doc["redacted"] is True and doc["machine"]["stand_in"] is True
    assert _schema(env).is_valid(doc)
    from analyzer.output.bundle import Bundle

    Bundle.model_validate(doc)   # strictly: every key is the model's
    r = env.capscan("ingest", "--json", str(BUNDLE_FIXTURE))
    assert r.returncode == 0, r.stderr.decode()
    items = json.loads(r.stdout)
    ids = [rid for item in items for rid in item["run_ids"]]
    assert len(ids) == len(doc["logs"])   # one run per log (the probe runs and llama-bench's)
    rows = {json.loads(env.capscan("show", "--json", str(rid)).stdout)["source"].rsplit("[", 1)[-1].rstrip("]"):
            json.loads(env.capscan("show", "--json", str(rid)).stdout) for rid in ids}
    stock, fixed = rows["llama-bench stock"], rows["llama-bench capscan"]
    assert stock["verdict"] == "capability-downgrade" and stock["device"]["apple_family"] == 1005
    assert fixed["verdict"] == "healthy" and fixed["capabilities"]["simdgroup_mm"] is True
    assert rows["capscan probe"]["shim"]["name"] == "capscan-interposer"
    again = env.capscan("ingest", str(BUNDLE_FIXTURE))
    assert again.returncode == 0 and "already imported" in again.stderr.decode()


@pytest.mark.parametrize("damage, said", [
    (lambda t: t[: len(t) // 2], "cannot be read"),
    (lambda t: t.replace('"logs": [', '"logs": 7, "x": ['), "cannot be read"),
])
def test_a_damaged_bundle_is_one_line_and_stores_nothing(env, tmp_path, damage, said):
    bad = tmp_path / "bad.json"
    bad.write_text(damage(BUNDLE_FIXTURE.read_text()))
    r = env.capscan("ingest", str(bad))
    err = r.stderr.decode()
    assert r.returncode == 2 and said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    con = sqlite3.connect(env.db)
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_redaction_replaces_names_where_they_stand_not_the_logs_words():
    """A user name in a path, a prompt or USER=; a host name wherever it stands alone; the same letters inside
    another word, or a user name that is also a word of the log, stay."""
    from analyzer.remedy.bundle import Redactor

    red = Redactor(["/Users/alex"], ["alex"], ["alexs-mac.local", "alexs-mac"])
    said = red.text("/Users/alex/m.gguf alex@alexs-mac.local % ls /Users/alex2 /Volumes/alex/x USER=alex; "
                    "alex said; on alexs-mac. alexs-mac-2")
    assert said == ("~/m.gguf <user>@<host> % ls /Users/alex2 /Volumes/<user>/x USER=<user>; alex said; on <host>. "
                    "alexs-mac-2")
    assert Redactor(["/Users/alex"], ["alex"], ["alexs-mac"], on=False).text("/Users/alex on alexs-mac") == \
        "/Users/alex on alexs-mac"


def test_the_macos_hypotheses_through_the_stand_in_tools(env, linux_build, mac_library, tmp_path):
    """darwin's path with stand-in tools: a Python that loses the library under the scrub at load, which
    `remedy run` does not recognise as a launcher (a script), is a fail naming the three answers; the host default is guided (before: not-run with
    the steps; after --host-default-set: the stock device's answer decides); on the host it is not-run-here."""
    env.darwin()
    py = tmp_path / "Python.framework" / "Versions" / "3.12" / "bin" / "python3"
    py.parent.mkdir(parents=True)
    py.write_text("#!/bin/sh\nif [ \"$CAPSCAN_INTERPOSER_SCRUB\" = 1 ]; then v=false; else v=true; fi\n"
                  "echo \"supports_family.$CAPSCAN_METAL_APPLE_FAMILY_MAX=$v\"\n")
    py.chmod(0o755)
    probe = str(linux_build / "capscan-probe")
    out = tmp_path / "b.json"
    base = ["remedy", "selftest", "--bundle", str(out), "--probe", probe, "--dylib", str(mac_library)]
    env.capscan(*base, "--python", str(py))
    h = {x["name"]: x for x in json.loads(out.read_text())["hypotheses"]}
    fp = h["framework-python"]
    # a script is no framework launcher by what it is, so `remedy run` would scrub at load for it too
    assert fp["status"] == "fail" and fp["actual"].endswith(
        "scrub at load: false; as remedy run sets it: false; no scrub: true"), fp
    assert len(fp["timings_ms"]) == 3
    hd = h["host-default"]
    assert hd["status"] == "not-run" and "--host-default-set" in hd["why"] and "stop and start" in hd["why"]
    assert hd["actual"] == "stock supports_family.1007=false"
    env.capscan(*base, "--python", str(py), "--host-default-set")
    hd = {x["name"]: x for x in json.loads(out.read_text())["hypotheses"]}["host-default"]
    assert hd["status"] == "fail" and "the user confirms" in hd["actual"]
    env.vars["CAPSCAN_FAKE_BRAND"] = "Apple M1 Ultra"   # bare metal: the host
    env.capscan(*base)
    h = {x["name"]: x for x in json.loads(out.read_text())["hypotheses"]}
    assert h["host-default"]["status"] == "not-run-here" and "this is the host" in h["host-default"]["why"]
    assert h["library-hooks"]["status"] == "not-run"      # not a VM: nothing was injected


@pytest.mark.parametrize("results, status", [
    ({"simdgroup_mm": "pass", "simdgroup_reduction": "pass", "bfloat": "not-run"}, "pass"),
    ({"simdgroup_mm": "fail", "simdgroup_reduction": "pass"}, "fail"),
    ({"simdgroup_mm": "compile-error", "simdgroup_reduction": "pass"}, "fail"),
    ({"simdgroup_mm": "crash", "simdgroup_reduction": "pass"}, "error"),      # the check's own trouble,
    ({"simdgroup_mm": "pass", "simdgroup_reduction": "timeout"}, "error"),    # never the GPU's answer
])
def test_a_kernel_hypothesis_fails_only_on_the_gpus_answer(results, status):
    from analyzer.output.bundle import Hypothesis
    from analyzer.remedy.bundle import _judge
    from analyzer.remedy.kernels import KernelCheck

    kc = KernelCheck(results={cap: {"result": r, "message": None} for cap, r in results.items()})
    h = _judge(Hypothesis(name="kernels-stock", claim="c", expected="e", actual=None, status="not-run"), kc, 0)
    assert h.status == status, h
    assert ("could not run" in (h.why or "")) == (status == "error")
