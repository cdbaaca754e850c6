"""What a device claims, asked directly: capability probes (the Lume/Tart
4-line form, the Anka one-line JSON, capscan's own probe in both forms),
``system_profiler SPDisplaysDataType`` (text and -json), and the banners of
capability shims (Lume, Tart, Anka, capscan's interposer)."""

from __future__ import annotations

import json

import regex

from analyzer import chips
from analyzer.parsers.base import (
    REJECTED_KEY,
    Event,
    Format,
    Pattern,
    Rejected,
    Sample,
    fits_sqlite,
    rx,
    text_field,
    to_bool,
    to_int,
)

_KV = regex.compile(r"^(?P<key>[a-z_][\w.]*)=(?P<value>.*)$")
_PARAM = regex.compile(r"\b(\w++)=([^\s,]++)")


def _probe_kv_events(line_no: int, text: str, key: str, value: str) -> list[Event]:
    value = value.strip()
    if key == "device":
        return [Event("probe.device", line_no, text, {"name": value})]
    if key.startswith("supports_family."):
        code, supported = to_int(key.split(".", 1)[1]), to_bool(value)
        if code is None or supported is None:
            return []
        return [Event("probe.family", line_no, text, {"code": code, "supported": supported})]
    if key == "max_threadgroup_memory":
        n = to_int(value)
        return [Event("probe.threadgroup_memory", line_no, text, {"bytes": n})] if n is not None else []
    if key == "recommended_max_working_set_size":
        n = to_int(value)
        return [Event("probe.working_set", line_no, text, {"mb": round(n / 1e6, 2)})] if n is not None else []
    if key == "has_unified_memory":
        b = to_bool(value)
        return [Event("probe.unified_memory", line_no, text, {"value": b})] if b is not None else []
    return _host_and_kernel_events(line_no, text, key, value)


KERNEL_CAPABILITIES = chips.KERNEL_FLAGS
KERNEL_RESULTS = ("pass", "fail", "compile-error", "timeout", "crash", "not-run")
MAX_MESSAGE = 300  # the probe prints at most 300 bytes of a compiler message
# Metal has about 25 GPU families (Apple1-10, Mac1-2, Common1-3, Metal3-4, ...); a probe listing more is
# hostile: the first MAX_FAMILIES answers are kept, the rest counted (70,000 of them peaked at 236 MB)
MAX_FAMILIES = 64


def _host_and_kernel_events(line_no: int, text: str, key: str, value: str) -> list[Event]:
    """capscan-probe's host lines (cpu_brand, arch, hv_vmm_present) and --kernels results."""
    if key == "cpu_brand":  # machdep.cpu.brand_string: 'Apple M1 Ultra (Virtual)' in a guest
        return [Event("host.processor", line_no, text, {"name": value})] if value else []
    if key == "arch":
        return [Event("app.arch", line_no, text, {"arch": value})] if value in ("arm64", "x86_64") else []
    if key == "hv_vmm_present":
        b = to_bool(value)
        return [Event("probe.hv_vmm", line_no, text, {"value": b})] if b is not None else []
    if not key.startswith("kernel."):
        return []
    name, _, sub = key[len("kernel."):].partition(".")
    if name in KERNEL_CAPABILITIES and not sub:
        if value not in KERNEL_RESULTS:
            raise Rejected(f"unknown kernel result {value[:20]!r}")
        return [Event("probe.kernel", line_no, text, {"capability": name, "result": value})]
    if name in KERNEL_CAPABILITIES and sub == "message":
        return [Event("probe.kernel_message", line_no, text, {"capability": name, "message": value[:MAX_MESSAGE]})]
    if name == "msl_version" and not sub:
        return [Event("probe.kernel_info", line_no, text, {"msl_version": value[:16] or None})]
    if name == "elapsed_ms" and not sub:
        n = to_int(value)
        return [Event("probe.kernel_info", line_no, text, {"elapsed_ms": n})] if n is not None else []
    return []


def _json_kernels(obj: dict) -> dict | None:
    """capscan-probe --json --kernels: {"msl_version", "elapsed_ms", cap: {"result", "message"}}."""
    k = obj.get("kernels")
    if not isinstance(k, dict):
        return None
    out: dict = {"results": {}, "msl_version": k.get("msl_version") if isinstance(k.get("msl_version"), str) else None,
                 "elapsed_ms": k.get("elapsed_ms") if type(k.get("elapsed_ms")) is int else None}
    for cap in KERNEL_CAPABILITIES:
        r = k.get(cap)
        if isinstance(r, dict) and r.get("result") in KERNEL_RESULTS:
            message = r.get("message")
            out["results"][cap] = {"result": r["result"],
                                   "message": message[:MAX_MESSAGE] if isinstance(message, str) else None}
    return out


class _FamilyBudget:
    """A probe's family answers up to MAX_FAMILIES distinct codes; a line past the budget is refused
    (counted by the Dispatcher) and the probe's other lines are still read."""

    def __init__(self) -> None:
        self.codes: set[int] = set()
        self.survives_rejects = False  # read by the Dispatcher after a Rejected: only the budget's go on

    def check(self, events: list[Event]) -> list[Event]:
        for ev in events:
            if ev.kind == "probe.family" and ev.data["code"] not in self.codes:
                if len(self.codes) >= MAX_FAMILIES:
                    self.survives_rejects = True
                    raise Rejected("a probe family past the budget")
                self.codes.add(ev.data["code"])
        return events


class _CapscanProbeCollector(_FamilyBudget):
    """capscan-probe key=value lines, after 'probe=capscan-probe 1'."""

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        self.survives_rejects = False
        m = _KV.match(text)
        if not m or m.group("key") == "probe":
            return None
        return self.check(_probe_kv_events(line_no, text, m.group("key"), m.group("value")))

    def finish(self) -> list[Event]:
        return []


class _FourLineProbeCollector(_FamilyBudget):
    """The Lume/Tart probe: device=, family=, supports_family=, max_threadgroup_memory=."""

    def __init__(self) -> None:
        super().__init__()
        self.family: int | None = None

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        self.survives_rejects = False
        m = _KV.match(text)
        if not m or m.group("key") not in ("family", "supports_family", "max_threadgroup_memory"):
            return None
        key, value = m.group("key"), m.group("value").strip()
        if key == "family":
            self.family = to_int(value)
            return []
        if key == "supports_family":
            supported = to_bool(value)
            if self.family is None or supported is None:
                return []
            return self.check([Event("probe.family", line_no, text, {"code": self.family, "supported": supported})])
        return _probe_kv_events(line_no, text, key, value)

    def finish(self) -> list[Event]:
        return []


def _int_field(obj: dict, key: str) -> int | None:
    """An integer field of a probe's JSON (not a bool, and storable); else None."""
    value = obj.get(key)
    return value if type(value) is int and fits_sqlite(value) else None


def _probe_json(m: regex.Match) -> dict | None:
    try:
        obj = json.loads(m.group(0))
    except RecursionError:
        raise Rejected("JSON nested too deep") from None
    except ValueError:
        return None
    if not isinstance(obj, dict) or "device" not in obj:
        return None
    # The device and probe names are shown and stored: strings, cleaned, or the record is rejected.
    out: dict = {"name": text_field(obj, "device"), "families": {}}
    sf = obj.get("supports_family")
    if isinstance(sf, dict):  # capscan-probe --json
        out["probe"] = text_field(obj, "probe") or "capscan-probe"
        for code, val in sf.items():
            if len(out["families"]) >= MAX_FAMILIES:
                out[REJECTED_KEY] = len(sf) - MAX_FAMILIES  # counted, not kept: memory bounded
                break
            c = to_int(str(code))
            if c is not None and isinstance(val, bool):
                out["families"][c] = val
    elif isinstance(sf, bool) and _int_field(obj, "family") is not None:  # anka-gpu-probe
        out["probe"] = "anka-gpu-probe"
        out["families"][obj["family"]] = sf
    else:
        return None
    if _int_field(obj, "max_threadgroup_memory") is not None:
        out["threadgroup_memory"] = obj["max_threadgroup_memory"]
    if _int_field(obj, "recommended_max_working_set_size") is not None:
        out["working_set_mb"] = round(obj["recommended_max_working_set_size"] / 1e6, 2)
    if isinstance(obj.get("has_unified_memory"), bool):
        out["unified_memory"] = obj["has_unified_memory"]
    brand = text_field(obj, "cpu_brand")
    if brand:
        out["cpu_brand"] = brand
    if obj.get("arch") in ("arm64", "x86_64"):
        out["arch"] = obj["arch"]
    if isinstance(obj.get("hv_vmm_present"), bool):
        out["hv_vmm_present"] = obj["hv_vmm_present"]
    kernels = _json_kernels(obj)
    if kernels is not None:
        out["kernels"] = kernels
    return out


PROBE = Format(
    name="probe",
    description="capability probes: capscan-probe (key=value and --json), Lume/Tart metal-capabilities, anka-gpu-probe",
    literals=("capscan-probe", "device=", "supports_family"),
    patterns=(
        Pattern("probe.start", rx(r"^probe=capscan-probe (?P<version>\d+)\s*$"),
                collector=lambda m, n, t: _CapscanProbeCollector()),
        Pattern("probe.json", rx(r"^\{(?>.*\"supports_family\").*\}$"), _probe_json),
        Pattern("probe.device", rx(r"^device=(?P<name>\S(?:.*\S)?+)\s*+$"), collector=lambda m, n, t: _FourLineProbeCollector()),
    ),
    samples=(
        Sample("probe=capscan-probe 1", "probe.start", {"version": "1"}),
        Sample("device=Apple Paravirtual device", "probe.device", {"name": "Apple Paravirtual device"}),
        Sample('{"device":"Apple Paravirtual device","family":1009,"supports_family":false,"max_threadgroup_memory":32768}',
               "probe.json", {"name": "Apple Paravirtual device", "probe": "anka-gpu-probe", "families": {1009: False},
                              "threadgroup_memory": 32768}),
        Sample('{"probe":"capscan-probe","version":1,"device":"Apple M1 Ultra","supports_family":{"1007":true,"1008":false},'
               '"max_threadgroup_memory":32768,"recommended_max_working_set_size":115448725504,"has_unified_memory":true}',
               "probe.json", {"name": "Apple M1 Ultra", "families": {1007: True, 1008: False}, "unified_memory": True}),
        Sample('{"probe":"capscan-probe","version":1,"device":"Apple Paravirtual device","supports_family":{"1005":true,'
               '"1006":false},"max_threadgroup_memory":32768,"recommended_max_working_set_size":11453251584,'
               '"has_unified_memory":true,"cpu_brand":"Apple M1 Ultra (Virtual)","arch":"arm64","hv_vmm_present":true,'
               '"kernels":{"msl_version":"3.1","elapsed_ms":142,"simdgroup_reduction":{"result":"pass","message":null},'
               '"simdgroup_mm":{"result":"fail","message":"simdgroup_float8x8: expected 21 got 22 at 9"},'
               '"bfloat":{"result":"not-run","message":null}}}',
               "probe.json", {"name": "Apple Paravirtual device", "cpu_brand": "Apple M1 Ultra (Virtual)",
                              "hv_vmm_present": True}),
    ),
)


SYSTEM_PROFILER = Format(
    name="system_profiler",
    description="system_profiler SPDisplaysDataType, text and -json (Chipset Model, Metal support)",
    literals=("Chipset Model", "Metal Support", "Metal Family", "sppci_model", "spdisplays_mtlgpufamilysupport",
              "spdisplays_metal"),
    patterns=(
        Pattern("sysprof.chipset", rx(r"^Chipset Model:\s*(?P<name>\S(?:.*\S)?+)\s*+$")),
        Pattern("sysprof.chipset", rx(r'"sppci_model"\s*:\s*"(?P<name>[^"]+)"')),
        Pattern("sysprof.metal", rx(r"^Metal(?: Support| Family)?:\s*(?P<support>\S(?:.*\S)?+)\s*+$")),
        Pattern("sysprof.metal", rx(r'"spdisplays_(?:mtlgpufamilysupport|metal)"\s*:\s*"(?P<support>[^"]+)"')),
    ),
    samples=(
        Sample("Chipset Model: Apple Paravirtual device", "sysprof.chipset", {"name": "Apple Paravirtual device"}),
        Sample('"sppci_model" : "Apple Paravirtual device",', "sysprof.chipset", {"name": "Apple Paravirtual device"}),
        Sample("Metal Support: Metal 3", "sysprof.metal", {"support": "Metal 3"}),
        Sample('"spdisplays_mtlgpufamilysupport" : "spdisplays_metal3",', "sysprof.metal", {"support": "spdisplays_metal3"}),
    ),
)


def _shim(m: regex.Match) -> dict:
    params = dict(_PARAM.findall(m.group("params") or ""))
    cap = None
    for key in ("apple_family_max", "appleFamilyMax", "appleFamilyCeiling", "familyMax"):
        if key in params:
            cap = to_int(params[key])
            break
    return {"name": m.group("name"), "process": m.group("proc").rsplit("/", 1)[-1], "apple_family_max": cap,
            "params": params}


SHIMS = Format(
    name="shims",
    description="capability shim banners: LumeMetalCapabilities, TartMetalCapabilities, AnkaGpuFamilyBoost, "
                "capscan-interposer",
    literals=("MetalCapabilities]", "[AnkaGpuFamilyBoost]", "[capscan-interposer]"),
    patterns=(
        Pattern("shim.banner", rx(r"\[(?P<name>\w+MetalCapabilities)\] Enabled for (?P<proc>\S+) \((?P<params>[^)]*)\)"),
                _shim),
        # the same banner as the Tart guest agent's copies print it: a path for the process, the settings after a
        # colon or none at all (a banner is the image's claim: the family lines say whether it took)
        Pattern("shim.banner", rx(r"\[(?P<name>\w+MetalCapabilities)\] Enabled for (?P<proc>[^\s:()]++)"
                                  r"(?::? ++(?P<params>(?:\w++=\S++,? *+)++))?+\s*+$"), _shim),
        Pattern("shim.banner", rx(r"\[(?P<name>AnkaGpuFamilyBoost)\] active in (?P<proc>\S+) \((?P<params>[^)]*)\)"), _shim),
        Pattern("shim.banner", rx(r"\[(?P<name>capscan-interposer)\] enabled for (?P<proc>\S+) \((?P<params>[^)]*)\)"), _shim),
        Pattern("shim.message",
                rx(r"\[(?P<name>\w+MetalCapabilities|AnkaGpuFamilyBoost|capscan-interposer)\] (?P<message>\S(?:.*\S)?+)\s*+$")),
    ),
    samples=(
        Sample("[LumeMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009 maxThreadgroupMemory=65536)",
               "shim.banner", {"name": "LumeMetalCapabilities", "process": "llama-bench", "apple_family_max": 1009}),
        Sample("[TartMetalCapabilities] Enabled for llama-cli (appleFamilyMax=1009 maxThreadgroupMemory=65536)",
               "shim.banner", {"name": "TartMetalCapabilities", "apple_family_max": 1009}),
        Sample("2026-10-12 09:14:03.118 llama-server[1893:22107] [TartMetalCapabilities] Enabled for "
               "/opt/homebrew/bin/llama-server", "shim.banner",
               {"name": "TartMetalCapabilities", "process": "llama-server", "apple_family_max": None}),
        Sample("[TartMetalCapabilities] Enabled for whisper-cli: appleFamilyMax=1008, maxThreadgroupMemory=65536",
               "shim.banner", {"name": "TartMetalCapabilities", "process": "whisper-cli", "apple_family_max": 1008}),
        Sample("[AnkaGpuFamilyBoost] active in llama-bench (appleFamilyCeiling=1009 threadgroupMemoryMin=65536)",
               "shim.banner", {"name": "AnkaGpuFamilyBoost", "apple_family_max": 1009}),
        Sample("[capscan-interposer] enabled for llama-bench (apple_family_max=1007 threadgroup_memory=stock)",
               "shim.banner", {"name": "capscan-interposer", "apple_family_max": 1007}),
        Sample("[LumeMetalCapabilities] Required device methods are unavailable; leaving stock capabilities unchanged",
               "shim.message", {"name": "LumeMetalCapabilities"}),
    ),
)
