"""Safety property: no input whose GPU is AMD, Intel, NVIDIA (Intel Macs), or a VM on an Intel host
is ever reported fixable, whatever else the log says (downgrade symptoms,
shim banners, Apple5 families, flags off, llama-bench rows, any era, any
order, any wrapping)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.store import open_db

import io

AMD_INTEL = ["AMD Radeon Pro 5500M", "AMD Radeon Pro W6800", "AMD Radeon RX 580", "Intel(R) UHD Graphics 630",
             "Intel(R) Iris(TM) Plus Graphics", "Intel Iris Pro Graphics", "AMD FirePro D700",
             "NVIDIA GeForce GT 750M"]
INTEL_CPUS = ["Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz", "Intel(R) Xeon(R) W-3245 CPU @ 3.20GHz",
              "Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz"]
FUNCS = ["ggml_metal_init", "ggml_metal_device_init"]


def block(func: str, name: str, families: list[int], flags: dict[str, bool], unified: bool | None) -> list[str]:
    lines = [f"{func}: GPU name:   {name}"]
    for code in families:
        group = {1: "Apple", 3: "Common", 5: "Metal"}[code // 1000]
        n = code - {1: 1000, 3: 3000, 5: 4998}[code // 1000]
        pad = " " if group == "Common" else "  "
        lines.append(f"{func}: GPU family: MTLGPUFamily{group}{n}{pad}({code})")
    labels = {"simdgroup_reduction": "simdgroup reduction   ", "simdgroup_mm": "simdgroup matrix mul. ",
              "bfloat": "has bfloat            "}
    for flag, value in flags.items():
        lines.append(f"{func}: {labels[flag]}= {str(value).lower()}")
    if unified is not None:
        lines.append(f"{func}: has unified memory    = {str(unified).lower()}")
    return lines


SYMPTOMS = [
    "ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'",
    "ggml_metal_init: skipping kernel_soft_max_f32                   (not supported)",
    "ggml_metal_init: skipping kernel_mul_mm_q4_K_f32                (not supported)",
    "[LumeMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009 maxThreadgroupMemory=65536)",
    "[AnkaGpuFamilyBoost] active in llama-bench (appleFamilyCeiling=1009 threadgroupMemoryMin=65536)",
    "whisper_backend_init: Metal GPU does not support family 7 - falling back to CPU",
    "llama_perf_context_print:        eval time =    3120.51 ms /    63 runs   (   49.53 ms per token,    20.19 tokens per second)",
    "| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | MTL,BLAS   |       8 |         tg128 |         12.63 ± 0.40 |",
    "load_tensors: offloaded 23/23 layers to GPU",
]
WRAPS = [lambda s: s, lambda s: "0.00.012.345 I " + s, lambda s: "> " + s, lambda s: "`" + s + "`",
         lambda s: "Aug 09 12:41:47 mac llama-server[2738]: " + s, lambda s: "\x1b[34m" + s + "\x1b[0m"]


@st.composite
def hostile_logs(draw) -> str:
    scenario = draw(st.sampled_from(["amd-intel-gpu", "intel-host-vm", "intel-host-bench"]))
    func = draw(st.sampled_from(FUNCS))
    fams = draw(st.lists(st.sampled_from([1005, 1006, 3003, 5001, 5002]), max_size=3, unique=True))
    flags = draw(st.dictionaries(st.sampled_from(["simdgroup_reduction", "simdgroup_mm", "bfloat"]), st.booleans()))
    lines: list[str] = []
    if scenario == "amd-intel-gpu":
        name = draw(st.sampled_from(AMD_INTEL))
        lines += block(func, name, fams, flags, draw(st.sampled_from([None, False, True])))
    elif scenario == "intel-host-vm":
        lines += block(func, draw(st.sampled_from(["Apple Paravirtual device", "MTL0 (Apple Paravirtual device)"])),
                       fams, flags, False)
    else:
        cpu = draw(st.sampled_from(INTEL_CPUS))
        for test, (p, g, ts) in {"pp": (512, 0, 36.0), "tg": (0, 128, 2.9)}.items():
            lines.append('{"build_commit": "3ffbbd5c", "build_number": 4840, "cpu_info": "%s (Virtual)", '
                         '"gpu_info": "Apple Paravirtual device", "backends": "Metal,BLAS", "model_type": "llama 1B", '
                         '"n_gpu_layers": 99, "n_prompt": %d, "n_gen": %d, "n_depth": 0, "avg_ts": %s, '
                         '"stddev_ts": 0.1}' % (cpu, p, g, ts))
    lines += draw(st.lists(st.sampled_from(SYMPTOMS), max_size=6))
    order = draw(st.permutations(range(len(lines))))
    wrap = draw(st.sampled_from(WRAPS))
    return "\n".join(wrap(lines[i]) for i in order) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_logs())
def test_amd_intel_and_intel_hosted_vms_are_never_fixable(text):
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "p.db")
        result = ingest(db, Input("hypothesis.log", io.BytesIO(text.encode())))
        for run in diagnose_runs(db, result.run_ids, refresh_peers=True):
            assert run.diagnosis.fixable is False, (text, run.diagnosis.summary)
            if run.diagnosis.verdict == "capability-downgrade":
                # a downgrade without a known Apple-silicon host must say why it is not fixable
                assert "Not marked fixable" in run.diagnosis.summary
