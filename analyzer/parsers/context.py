"""Lines around a run that say which machine it ran on, or what a wrapper did:
`system_profiler SPHardwareDataType`'s Hardware Overview, `sw_vers` and the
macOS version, MLX's `device_info()`, llama.cpp's memory breakdown table,
memory-mapped weight buffers, and apps that print their own decisions
("Metal device looks virtualised (...)", "Forcing gpu_layers=0")."""

from __future__ import annotations

import regex

from analyzer.parsers.base import Format, Pattern, Sample, rx


def _macos(m: regex.Match) -> dict:
    return {"version": m.group("version")}


def _intel_cpu_type(m: regex.Match) -> dict | None:
    name = m.group("name")
    return {"name": name} if regex.search(r"\bIntel\b", name) else None


def _gpu_layers(m: regex.Match) -> dict:
    return {"layers": int(m.group("layers"))}


def _model_buffer(m: regex.Match) -> dict:
    name = m.group("buffer")
    mapped = name.endswith("_Mapped")
    name = name.removesuffix("_Mapped")
    # the CPU's own buffer kinds (repacked weights, pinned host memory for a GPU) are the CPU's
    if name.startswith("CPU_") or name.endswith("_Host"):
        name = "CPU" if name.startswith("CPU_") else name
    return {"buffer": name, "mapped": mapped}


CONTEXT = Format(
    name="context",
    description="the machine around a run (Hardware Overview chip, macOS version, MLX device_info, memory breakdown, "
                "mmap'd buffers) and wrappers that disable the GPU",
    literals=("Chip:", "Model Name:", "ProductVersion:", "System Version:", "platform.platform:", "'device_name':",
              "Processor Name:", "machdep.cpu.brand_string", '"cpu_type"', "Intel(R) ",
              "llama_memory_breakdown_print", " model buffer size", "llm_load_tensors:", " KV buffer size",
              "assigned to device", "looks virtuali", "gpu_layers=0",
              "GPU:", "Arch:", "Architecture:", "n_gpu_layers=0", "gpuLayers=0", "); falling back to CPU",
              "falling back to using no GPU", "cpu: ", "model      :", "loading model '", "Model Identifier:",
              "% CPU", "% GPU", "No GPU detected"),
    patterns=(
        # system_profiler SPHardwareDataType: "Chip: Apple M2 Max" (a guest reads "Apple M1 Ultra (Virtual)")
        Pattern("host.chip", rx(r"^Chip:\s+(?P<chip>Apple \S(?:.*\S)?+)\s*+$")),
        Pattern("host.model_name", rx(r"^Model Name:\s+(?P<name>\S(?:.*\S)?+)\s*+$")),
        # An Intel Mac's Hardware Overview: "Processor Name: 6-Core Intel Core i7" (Apple silicon prints "Chip:");
        # the same in system_profiler -json ("cpu_type", below), and sysctl machdep.cpu.brand_string with its name.
        Pattern("host.processor", rx(r"^(?:Processor Name:|machdep\.cpu\.brand_string:)\s+(?P<name>\S(?:.*\S)?+)\s*+$")),
        # system_profiler SPHardwareDataType -json prints "cpu_type" on a line of its own, and only on an Intel
        # Mac (Apple silicon prints "chip_type"): the key quoted anywhere else (an echoed prompt) is no machine's
        Pattern("host.processor", rx(r'^\s*+"cpu_type"\s*+:\s*+"(?P<name>[^"]++)",?+\s*+$'), _intel_cpu_type),
        # `sysctl -n machdep.cpu.brand_string` on an Intel Mac: the bare brand string, a line of its own
        Pattern("host.processor", rx(r"^(?P<name>Intel\(R\) (?:Core\(TM\)|Xeon\(R\)|Pentium\(R\)|Celeron\(R\))"
                                     r"[^|:]*? CPU @ \d+(?:\.\d+)?GHz)\s*$")),
        # Go's testing header ('goos: darwin', 'goarch: arm64', 'cpu: Apple M2 Pro'): the brand string, as sysctl
        # gives it ('Apple M1 (Virtual)' in a guest)
        Pattern("host.processor", rx(r"^cpu:\s++(?P<name>(?:Apple|Intel\(R\)) \S(?:.*\S)?+)\s*+$")),
        # system_profiler's model identifier: 'Mac14,2', a guest's 'VirtualMac2,1'
        Pattern("host.model_name", rx(r"^\s*+Model Identifier:\s++(?P<name>(?:Virtual)?+Mac[A-Za-z]*+\d++,\d++)\s*+$")),
        # `ollama ps`: NAME ID SIZE PROCESSOR UNTIL; its PROCESSOR column says where the loaded model runs
        Pattern("ollama.ps", rx(r"^\S++\s++[0-9a-f]{12}\s++\d++(?:\.\d++)?+\s*+[KMGT]B\s++"
                                r"(?P<processor>100% CPU|100% GPU|\d++%/\d++% CPU/GPU)\b")),
        # the model file a program names: llama-cli's 2026 banner ('model      : models/x.gguf') and llama-server's
        # "load_model: loading model 'models/x.gguf'"
        Pattern("model.file", rx(r"^model {6}:\s++(?P<path>\S(?:.*\S)?+)\s*+$")),
        Pattern("model.file", rx(r"\bload_model: loading model '(?P<path>[^']++)'")),
        # an app's own 'No GPU detected' (benchmark harnesses, wrappers): it ran on the CPU
        Pattern("wrapper.gpu_layers", rx(r"\bNo GPU detected\b"), lambda m: {"layers": 0}),
        Pattern("host.macos", rx(r"^(?:ProductVersion:\s+|System Version:\s+macOS\s+|platform\.platform:\s+macOS-)"
                                 r"(?P<version>\d+(?:\.\d+){0,2})"), _macos),
        # MLX: mx.metal.device_info() -> {'architecture': 'air64_v26', 'device_name': 'Apple Paravirtual device', ...}
        Pattern("mlx.device", rx(r"'device_name':\s*'(?P<name>[^']+)'")),
        # llama_memory_breakdown_print: |   - MTL0 (Apple M2 Ultra) | 196608 = ...
        Pattern("memory.device", rx(r"llama_memory_breakdown_print: \|\s+- (?P<id>[A-Za-z]+\d+) \((?P<name>[^()|]+)\)")),
        # Where the weights went (load_tensors, 2024-11 on): 'CUDA0 model buffer size', 'MTL0_Mapped ...' (mmap'd),
        # 'CPU_Mapped', 'CPU_AARCH64', 'CUDA_Host'; and each layer's device at -v ('layer 3 assigned to device CPU')
        Pattern("model.buffer", rx(r"\b(?P<buffer>\w++) model buffer size"), _model_buffer),
        # the same before 2024-11 ('llm_load_tensors:        CPU buffer size', 'Metal buffer size', 'CUDA0 ...')
        Pattern("model.buffer", rx(r"\bllm_load_tensors:\s++(?P<buffer>\w++) buffer size\b"), _model_buffer),
        # where the KV cache went ('llama_kv_cache_init:        CPU KV buffer size', 'Metal KV', 'CUDA0 KV')
        Pattern("kv.buffer", rx(r"\bllama_kv_cache\w*+:\s++(?P<buffer>\w++) KV buffer size\b"), _model_buffer),
        Pattern("layer.device", rx(r"\blayer +(?P<layer>\d++) assigned to device (?P<device>\w++)")),
        # An app's own diagnostics, one 'key: value' a line (ToshLLM's header, bug-report templates): the GPU it
        # names (a vendor's name only: 'GPU: 2' or 'GPU: yes' say nothing) and the process's architecture
        Pattern("app.gpu", rx(r"^\s*+GPU:\s++(?P<name>(?:AMD|ATI|Intel|NVIDIA|Apple|Radeon)\b"
                              r"(?:[^|\s]++|\s++(?=[^|\s]))*+)\s*+$")),
        Pattern("app.arch", rx(r"^\s*+Arch(?:itecture)?+:\s++(?P<arch>x86_64|arm64e?+|aarch64|i386)\s*+$")),
        Pattern("wrapper.virtualised", rx(r"looks virtuali[sz]ed\s*\((?P<name>[^()]+)\)")),
        # node-llama-cpp (and apps on it) when no GPU binary loads: the model then runs with no layer on a GPU.
        # Only these wordings: a runtime that falls back for one library may still find another (ollama).
        Pattern("wrapper.gpu_layers", rx(r", falling back to using no GPU\b"
                                         r"|\bgetLlama\([^()]*+\) failed \(\w++\); falling back to CPU\b"),
                lambda m: {"layers": 0}),
        # node-llama-cpp and apps on it spell it in camelCase ("gpuLayers=0")
        Pattern("wrapper.gpu_layers", rx(r"\b(?:(?:n_)?+gpu_layers|gpuLayers)\s*+=\s*+(?P<layers>0)\b"), _gpu_layers),
    ),
    samples=(
        Sample("      Chip: Apple M2 Max", "host.chip", {"chip": "Apple M2 Max"}),
        Sample("      Model Name: MacBook Pro", "host.model_name", {"name": "MacBook Pro"}),
        Sample("      Processor Name: 6-Core Intel Core i7", "host.processor", {"name": "6-Core Intel Core i7"}),
        Sample("machdep.cpu.brand_string: Apple M1 Ultra (Virtual)", "host.processor", {"name": "Apple M1 Ultra (Virtual)"}),
        Sample("machdep.cpu.brand_string: Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz", "host.processor",
               {"name": "Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz"}),
        Sample('        "cpu_type" : "Quad-Core Intel Core i7",', "host.processor", {"name": "Quad-Core Intel Core i7"}),
        Sample('      "cpu_type" : "8-Core Intel Xeon W"', "host.processor", {"name": "8-Core Intel Xeon W"}),
        Sample("Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz", "host.processor",
               {"name": "Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz"}),
        Sample("Intel(R) Xeon(R) W-3245 CPU @ 3.20GHz", "host.processor", {"name": "Intel(R) Xeon(R) W-3245 CPU @ 3.20GHz"}),
        Sample("cpu: Apple M2 Pro", "host.processor", {"name": "Apple M2 Pro"}),
        Sample("cpu: Apple M1 (Virtual)", "host.processor", {"name": "Apple M1 (Virtual)"}),
        Sample("cpu: Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", "host.processor",
               {"name": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"}),
        Sample("      Model Identifier: VirtualMac2,1", "host.model_name", {"name": "VirtualMac2,1"}),
        Sample("      Model Identifier: Mac14,2", "host.model_name", {"name": "Mac14,2"}),
        Sample("      Model Identifier: MacBookPro18,4", "host.model_name", {"name": "MacBookPro18,4"}),
        Sample("llama3.2:latest    a80c4f17acd5    3.5 GB    100% CPU     4 minutes from now", "ollama.ps",
               {"processor": "100% CPU"}),
        Sample("gemma3:27b-it-qat    29eb0b9aeda3    25 GB    11%/89% CPU/GPU    4 minutes from now", "ollama.ps",
               {"processor": "11%/89% CPU/GPU"}),
        Sample("gemma3:4b       a2af6cc3eb7f    6.1 GB   100% GPU     4 minutes from now", "ollama.ps",
               {"processor": "100% GPU"}),
        Sample("WARNING: No GPU detected, running on CPU", "wrapper.gpu_layers", {"layers": 0}),
        Sample("model      : models/tiny-llama-q4_0.gguf", "model.file", {"path": "models/tiny-llama-q4_0.gguf"}),
        Sample("0.00.006.843 I srv    load_model: loading model 'models/tiny-llama-q4_0.gguf'", "model.file",
               {"path": "models/tiny-llama-q4_0.gguf"}),
        Sample("ProductVersion:\t\t14.6.1", "host.macos", {"version": "14.6.1"}),
        Sample("      System Version: macOS 14.6.1 (23G93)", "host.macos", {"version": "14.6.1"}),
        Sample("  platform.platform: macOS-14.4.1-arm64-arm-64bit", "host.macos", {"version": "14.4.1"}),
        Sample("{'architecture': 'air64_v26', 'device_name': 'Apple Paravirtual device', 'memory_size': 7516192768}",
               "mlx.device", {"name": "Apple Paravirtual device"}),
        Sample("llama_memory_breakdown_print: |   - MTL3 (Apple M2 Ultra) | 196608 = 187990 + (1604 =  1604 +  0 +  0) "
               "+  7014 |", "memory.device", {"id": "MTL3", "name": "Apple M2 Ultra"}),
        Sample("load_tensors:  MTL0_Mapped model buffer size =   934.70 MiB", "model.buffer",
               {"buffer": "MTL0", "mapped": True}),
        Sample("load_tensors:        CUDA0 model buffer size = 20038.81 MiB", "model.buffer",
               {"buffer": "CUDA0", "mapped": False}),
        Sample("load_tensors:   CPU_Mapped model buffer size =  4437.80 MiB", "model.buffer", {"buffer": "CPU", "mapped": True}),
        Sample("0.00.125.045 I load_tensors:  CPU_AARCH64 model buffer size =   648.00 MiB", "model.buffer",
               {"buffer": "CPU", "mapped": False}),
        Sample("llm_load_tensors:        CPU buffer size =  4685.30 MiB", "model.buffer", {"buffer": "CPU"}),
        Sample("llm_load_tensors:      Metal buffer size =  3577.56 MiB", "model.buffer", {"buffer": "Metal"}),
        Sample("llm_load_tensors:      CUDA0 buffer size =  3820.94 MiB", "model.buffer", {"buffer": "CUDA0"}),
        Sample("llama_kv_cache_init:        CPU KV buffer size =    64.00 MiB", "kv.buffer", {"buffer": "CPU"}),
        Sample("llama_kv_cache_init:      CUDA0 KV buffer size =   256.00 MiB", "kv.buffer", {"buffer": "CUDA0"}),
        Sample("llama_kv_cache_unified:      Metal KV buffer size =   448.00 MiB", "kv.buffer", {"buffer": "Metal"}),
        Sample("llama_kv_cache:        CPU KV buffer size =  1024.00 MiB", "kv.buffer", {"buffer": "CPU"}),
        Sample("load_tensors: layer  23 assigned to device CPU, is_swa = 0", "layer.device", {"layer": "23", "device": "CPU"}),
        Sample("load_tensors: layer   0 assigned to device CUDA0, is_swa = 0", "layer.device", {"device": "CUDA0"}),
        Sample("2026-07-30 11:02:14,552 WARNING [inference] Metal device looks virtualised (Apple Paravirtual device): "
               "simdgroup kernels are unavailable, will run on CPU", "wrapper.virtualised",
               {"name": "Apple Paravirtual device"}),
        Sample("GPU:    AMD Radeon RX 6950 XT", "app.gpu", {"name": "AMD Radeon RX 6950 XT"}),
        Sample("GPU: AMD Radeon HD - FirePro D700", "app.gpu", {"name": "AMD Radeon HD - FirePro D700"}),
        Sample("  GPU: Apple M2 Max", "app.gpu", {"name": "Apple M2 Max"}),
        Sample("Arch: x86_64", "app.arch", {"arch": "x86_64"}),
        Sample("Architecture: arm64", "app.arch", {"arch": "arm64"}),
        Sample("2026-07-30 11:02:14,552 INFO  [inference] Forcing gpu_layers=0", "wrapper.gpu_layers", {"layers": 0}),
        Sample("gpuLayers=0", "wrapper.gpu_layers", {"layers": 0}),
        Sample("getLlama({gpu:auto}) failed (NoBinaryFoundError); falling back to CPU", "wrapper.gpu_layers", {"layers": 0}),
        Sample('{"level":"warn","message":"[node-llama-cpp] The prebuilt binary for platform \\"linux\\" \\"x64\\" with CUDA '
               'support is not compatible with the current system, falling back to using no GPU"}', "wrapper.gpu_layers",
               {"layers": 0}),
        Sample("[llm] model loaded: gemma-3-4b-it-Q4_K_M.gguf gpuLayers=0 contextSize=8192", "wrapper.gpu_layers",
               {"layers": 0}),
    ),
)
