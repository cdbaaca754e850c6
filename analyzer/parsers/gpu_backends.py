"""Vulkan (incl. Venus in Linux guests and MoltenVK), CUDA, ROCm and MUSA
device lines. See shared/reference/log-formats.md sections 3 and 4."""

from __future__ import annotations

import regex

from analyzer.parsers.base import Event, Format, Pattern, Sample, rx, to_int

_FIELD = regex.compile(r"^\s*([\w ]+?):\s*(\S(?:.*\S)?+)\s*+$")
_GROUP = regex.compile(r"\(([^()]*+)\)")
# (no leading \s*: searched from every space of a run, it is quadratic; the name before it is stripped)
_LAST_GROUP = regex.compile(r"\(([^()]*+)\)$")


def _fields(rest: str) -> dict:
    out: dict = {}
    for part in rest.split("|"):
        m = _FIELD.match(part)
        if m:
            key = m.group(1).strip().replace(" ", "_")
            value = m.group(2)
            out[key] = to_int(value) if value.isdecimal() else value
    return out


def _split_name_driver(head: str) -> tuple[str, str | None]:
    """'Virtio-GPU Venus (Apple M2) (venus)' -> name, driver.

    A single trailing group is the driver unless it names an Apple chip, which
    Venus puts inside the device name ('Virtio-GPU Venus (Apple M2)')."""
    head = head.strip()
    groups = _GROUP.findall(head)
    m = _LAST_GROUP.search(head)
    if not m:
        return head, None
    if len(groups) >= 2 or not m.group(1).startswith("Apple"):
        return head[: m.start()].strip(), m.group(1)
    return head, None


def _vulkan_device(m: regex.Match) -> dict:
    name, driver = _split_name_driver(m.group("head"))
    data = {"index": int(m.group("index")), "name": name}
    if driver:
        data["driver"] = driver
    data.update(_fields(m.group("rest") or ""))
    return data


def _vulkan_using(m: regex.Match) -> dict:
    data = {"index": 0, "name": m.group("name").strip()}
    data.update(_fields(m.group("rest") or ""))
    return data


class _ListCollector:
    """Feeds the indented lines that follow a 'found N devices:' header to one
    pattern; the block ends at the first line that does not match."""

    def __init__(self, pattern: Pattern):
        self.pattern = pattern

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        data = self.pattern.match(text)
        if data is None:
            return None
        return [Event(self.pattern.kind, line_no, text, data)]

    def finish(self) -> list[Event]:
        return []


_VULKAN_OLD_DEVICE = Pattern(
    "vulkan.device",
    rx(r"^Vulkan(?P<index>\d+): (?P<head>\s*+[^|\s](?:[^|]*[^|\s])?+|\s)\s*+\|(?P<rest>.*)$"),
    _vulkan_device,
)

VULKAN = Format(
    name="vulkan",
    description="ggml_vulkan device lines, all eras (Venus guests, MoltenVK, llvmpipe)",
    literals=("ggml_vulkan",),
    patterns=(
        Pattern("vulkan.count", rx(r"ggml_vulkan: Found (?P<count>\d+) Vulkan devices?:"),
                collector=lambda m, n, t: _ListCollector(_VULKAN_OLD_DEVICE)),
        Pattern("vulkan.device",
                rx(r"ggml_vulkan: (?P<index>\d+) = (?P<head>\s*+[^|\s](?:[^|]*[^|\s])?+|\s)\s*+\|(?P<rest>.*)$"), _vulkan_device),
        Pattern("vulkan.device",
                rx(r"ggml_vulkan: Using (?P<name>\s*+[^|\s](?:[^|]*[^|\s])?+|\s)\s*+\|(?P<rest>.*)$"), _vulkan_using),
        Pattern("vulkan.none", rx(r"ggml_vulkan: No devices found")),
        Pattern("vulkan.cpu_device", rx(r"ggml_vulkan: Warning: Device type is CPU")),
    ),
    samples=(
        Sample("ggml_vulkan: 0 = Virtio-GPU Venus (Apple M1 Max) (venus) | uma: 1 | fp16: 1 | bf16: 0 | warp size: 32 | "
               "shared memory: 32768 | int dot: 0 | matrix cores: none", "vulkan.device",
               {"index": 0, "name": "Virtio-GPU Venus (Apple M1 Max)", "driver": "venus", "uma": 1, "matrix_cores": "none"}),
        Sample("ggml_vulkan: 0 = Apple M4 Max (MoltenVK) | uma: 1 | fp16: 1 | warp size: 32 | shared memory: 32768 | "
               "int dot: 0 | matrix cores: none", "vulkan.device", {"name": "Apple M4 Max", "driver": "MoltenVK"}),
        Sample("ggml_vulkan: Found 1 Vulkan devices:", "vulkan.count", {"count": "1"}),
        Sample("ggml_vulkan: Using Virtio-GPU Venus (Apple M2) | uma: 1 | fp16: 1 | warp size: 32", "vulkan.device",
               {"name": "Virtio-GPU Venus (Apple M2)", "uma": 1}),
        Sample("ggml_vulkan: No devices found.", "vulkan.none", {}),
        Sample("ggml_vulkan: Warning: Device type is CPU. This is probably not the device you want.", "vulkan.cpu_device", {}),
        # 2024-02..2024-11: devices listed under 'Found N Vulkan devices:'.
        Sample("Vulkan0: Virtio-GPU Venus (Apple M2) | uma: 1 | fp16: 1 | warp size: 32", "vulkan.device",
               {"index": 0, "name": "Virtio-GPU Venus (Apple M2)", "uma": 1}, via=_VULKAN_OLD_DEVICE),
        Sample("Vulkan0: AMD Radeon RX 6800 XT (RADV NAVI21) | uma: 0 | fp16: 1 | warp size: 64", "vulkan.device",
               {"name": "AMD Radeon RX 6800 XT", "driver": "RADV NAVI21"}, via=_VULKAN_OLD_DEVICE),
    ),
)


def _cuda_device(m: regex.Match) -> dict:
    g = m.groupdict()
    data: dict = {"index": int(g["index"]), "name": g["name"].strip()}
    if g.get("cc"):
        data["compute_capability"] = g["cc"]
    if g.get("arch"):
        data["arch"] = g["arch"]
    if g.get("vmm"):
        data["vmm"] = g["vmm"] == "yes"
    if g.get("vram"):
        data["vram_mib"] = int(g["vram"])
    return data


_CUDA_DEVICE = Pattern(
    "cuda.device",
    rx(
        r"^\s*Device (?P<index>\d+): (?P<name>[^,]+)(?:, compute capability (?P<cc>\d+\.\d+)"
        r"|, (?P<arch>gfx\w+)(?::\S*)? \(0x[0-9a-fA-F]+\))?(?:, VMM: (?P<vmm>yes|no))?(?:, Wave Size: \d+)?"
        r"(?:, VRAM: (?P<vram>\d+) MiB)?"
    ),
    _cuda_device,
)

CUDA = Format(
    name="cuda",
    description="ggml_cuda_init device list (CUDA, ROCm/HIP, MUSA) and init failures",
    literals=("ggml_cuda_init", "ggml_init_cublas", ", compute capability "),
    patterns=(
        Pattern("cuda.count",
                rx(r"(?:ggml_cuda_init|ggml_init_cublas): found (?P<count>\d+) (?P<backend>CUDA|ROCm|MUSA) devices"),
                collector=lambda m, n, t: _ListCollector(_CUDA_DEVICE)),
        # A CUDA device line pasted without its header (the header is the first line people cut off): its
        # compute capability makes it one on its own.
        Pattern("cuda.device", rx(r"^\s*+Device (?P<index>\d++): (?P<name>[^,]++), compute capability (?P<cc>\d+\.\d+)"
                                  r"(?:, VMM: (?P<vmm>yes|no))?+(?:, VRAM: (?P<vram>\d++) MiB)?+"),
                _cuda_device),
        Pattern("cuda.failed", rx(r"ggml_cuda_init: failed to initialize (?P<backend>CUDA|ROCm|MUSA): (?P<message>.+)$")),
    ),
    samples=(
        Sample("ggml_cuda_init: found 1 CUDA devices:", "cuda.count", {"count": "1", "backend": "CUDA"}),
        Sample("ggml_cuda_init: found 1 ROCm devices (Total VRAM: 24560 MiB):", "cuda.count", {"backend": "ROCm"}),
        Sample("ggml_init_cublas: found 1 CUDA devices:", "cuda.count", {"count": "1", "backend": "CUDA"}),
        Sample("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected", "cuda.failed",
               {"backend": "CUDA", "message": "no CUDA-capable device is detected"}),
        Sample("  Device 0: NVIDIA GeForce RTX 3090 Ti, compute capability 8.6, VMM: yes", "cuda.device",
               {"index": 0, "name": "NVIDIA GeForce RTX 3090 Ti", "compute_capability": "8.6", "vmm": True}),
        # Device lines follow the 'found N devices' header (parsed by its collector).
        Sample("  Device 0: NVIDIA GeForce RTX 4070 Ti, compute capability 8.9, VMM: yes", "cuda.device",
               {"index": 0, "name": "NVIDIA GeForce RTX 4070 Ti", "compute_capability": "8.9", "vmm": True},
               via=_CUDA_DEVICE),
        Sample("  Device 0: AMD Radeon RX 7900 XTX, gfx1100 (0x1100), VMM: no, Wave Size: 32, VRAM: 24560 MiB",
               "cuda.device", {"name": "AMD Radeon RX 7900 XTX", "arch": "gfx1100", "vram_mib": 24560}, via=_CUDA_DEVICE),
    ),
)


_DEVICE_MEMORY = regex.compile(r"\((?P<total>\d++) MiB, (?P<free>\d++) MiB free\)$")


def _device_info_device(m: regex.Match) -> dict:
    head = m.group("rest").rstrip()
    mem = _DEVICE_MEMORY.search(head)
    data: dict = {"backend": m.group("backend")}
    if mem:
        head = head[: mem.start()]
        data["vram_mib"], data["free_mib"] = int(mem.group("total")), int(mem.group("free"))
    if m.group("index"):
        data["index"] = int(m.group("index"))
    # a Vulkan name may carry its driver in parentheses, as the older device lines do
    name, driver = _split_name_driver(head) if data["backend"] == "Vulkan" else (head.strip(), None)
    data["name"] = name
    if driver:
        data["driver"] = driver
    return data


# '  - Vulkan0 : NVIDIA GeForce RTX 5060 (7895 MiB, 7127 MiB free)', '  - CPU     : AMD Ryzen 7 ... (32374 MiB, ...)':
# the ID is padded to the longest one; the memory group may be left out by a poster's cut.
_DEVICE_INFO_DEVICE = Pattern(
    "device_info.device",
    rx(r"^\s*+- (?P<backend>[A-Za-z]++)(?P<index>\d*+)\s*+: (?P<rest>\S.*+)$"),
    _device_info_device,
)

DEVICE_INFO = Format(
    name="device_info",
    description="the device_info block llama.cpp's tools print at start (2026): each backend device by its ID",
    literals=("device_info:",),
    patterns=(
        Pattern("device_info", rx(r"^device_info:\s*+$"), collector=lambda m, n, t: _ListCollector(_DEVICE_INFO_DEVICE)),
    ),
    samples=(
        Sample("device_info:", "device_info", {}),
        Sample("- Vulkan0 : NVIDIA GeForce RTX 5060 (7895 MiB, 7127 MiB free)", "device_info.device",
               {"backend": "Vulkan", "index": 0, "name": "NVIDIA GeForce RTX 5060", "vram_mib": 7895, "free_mib": 7127},
               via=_DEVICE_INFO_DEVICE),
        Sample("  - CUDA1 : NVIDIA GeForce RTX 3090 (24124 MiB, 23713 MiB free)", "device_info.device",
               {"backend": "CUDA", "index": 1, "name": "NVIDIA GeForce RTX 3090"}, via=_DEVICE_INFO_DEVICE),
        Sample("- CPU     : AMD Ryzen 7 7700X 8-Core Processor              (32374 MiB, 15485 MiB free)",
               "device_info.device", {"backend": "CPU", "name": "AMD Ryzen 7 7700X 8-Core Processor"},
               via=_DEVICE_INFO_DEVICE),
        Sample("- Vulkan0 : AMD Radeon RX 6800 XT (RADV NAVI21) (16368 MiB, 15900 MiB free)", "device_info.device",
               {"backend": "Vulkan", "name": "AMD Radeon RX 6800 XT", "driver": "RADV NAVI21"}, via=_DEVICE_INFO_DEVICE),
        Sample("- MTL0 : Apple M4 Max", "device_info.device", {"backend": "MTL", "index": 0, "name": "Apple M4 Max"},
               via=_DEVICE_INFO_DEVICE),
    ),
)


# whisper.cpp since 2024-11-20 (37c88027e, "use backend registry"): its GPU backend search, from
# src/whisper.cpp: "%s: device %zu: %s (type: %d)", "%s: found GPU device %zu: %s (type: %d, cnt: %d)",
# "%s: using %s backend" ('MTL0', 'CUDA0', 'Vulkan0'); "no GPU found" is a gpu.disabled line (system).
WHISPER = Format(
    name="whisper",
    description="whisper.cpp's GPU backend search (2024-11 on): devices, the GPU found, the backend used",
    literals=("whisper_backend_init_gpu: ", "whisper_backend_init: using "),
    patterns=(
        Pattern("whisper.gpu", rx(r"^(?>.*?\bwhisper_backend_init(?:_gpu)?+: )using (?P<backend>\w++) backend\s*+$")),
        Pattern("whisper.device", rx(r"^(?>.*?\bwhisper_backend_init_gpu: )(?P<found>found GPU )?device (?P<index>\d++): "
                                     r"(?P<name>[^()\n]{1,120}?) \(type: (?P<type>\d++)")),
    ),
    samples=(
        Sample("whisper_backend_init_gpu: using MTL0 backend", "whisper.gpu", {"backend": "MTL0"}),
        Sample("01:16:59 whisper_backend_init: using BLAS backend", "whisper.gpu", {"backend": "BLAS"}),
        Sample("whisper_backend_init_gpu: device 0: CPU (type: 0)", "whisper.device", {"name": "CPU", "type": "0"}),
        Sample("whisper_backend_init_gpu: device 1: MTL0 (type: 1)", "whisper.device", {"name": "MTL0", "type": "1"}),
        Sample("whisper_backend_init_gpu: found GPU device 1: MTL0 (type: 1, cnt: 0)", "whisper.device",
               {"name": "MTL0", "index": "1", "found": "found GPU "}),
    ),
)
