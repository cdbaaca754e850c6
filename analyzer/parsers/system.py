"""Process-level lines: system_info, load_backend, --list-devices, the build
target, the model name, layer offload, and ollama's device summary."""

from __future__ import annotations

import regex

from analyzer.parsers.base import Event, Format, Pattern, Sample, rx

_REG = regex.compile(r"([A-Za-z][\w ]*?) : (.*)$")
_FLAG = regex.compile(r"([A-Z0-9_]++) = (\S++)$")


def _system_info(m: regex.Match) -> dict:
    rest = m.group("rest")
    features: dict[str, str] = {}
    backends: list[str] = []
    for part in rest.split("|"):
        part = part.strip()
        if not part:
            continue
        # "Metal : EMBED_LIBRARY = 1" (>= 2024-11-25) or "AVX = 1"
        reg = _REG.match(part)
        if reg:
            backends.append(reg.group(1).strip())
            part = reg.group(2)
        kv = _FLAG.match(part)
        if kv:
            features[kv.group(1)] = kv.group(2)
    return {"n_threads": int(m.group("n")), "features": features, "backends": backends}


# One device under 'Available devices:': llama.cpp prints "  %s: %s (%zu MiB, %zu MiB free)\n"
# (the indent is gone once a line is normalised). The memory figures in parentheses at the end are
# what makes it a listed device: any other "name: text" line (a timing line, the Metal block that
# follows an empty list) is not one.
DEVICE_ITEM = Pattern(
    "devices.item",
    rx(r"^\s*(?P<id>[\w.-]+): (?P<description>\S.*?) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$"),
    lambda m: {"id": m.group("id"), "description": m.group("description"),
               "total_mib": int(m.group("total")), "free_mib": int(m.group("free"))},
)


class _DeviceListCollector:
    """Lines under 'Available devices:' (llama.cpp --list-devices): the listed devices, one
    per line, or '(none)'. The first line that is neither ends the list and is parsed as usual
    (the dispatcher hands it back to every format); so does any line after '(none)'."""

    def __init__(self, line_no: int, text: str):
        self.line_no, self.text, self.count = line_no, text, 0
        self.closed = False  # '(none)' was read: the list is over

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        if self.closed:
            return None
        if text.strip() == "(none)" and self.count == 0:
            self.closed = True
            return []
        data = DEVICE_ITEM.match(text)
        if data is None:
            return None
        self.count += 1
        return [Event("devices.item", line_no, text, data)]

    def finish(self) -> list[Event]:
        if self.count == 0:
            return [Event("devices.none", self.line_no, self.text, {})]
        return []


# One key=value pair of Go's slog text handler: key=bare or key="quoted, with \" escapes". A key starts
# the line or follows a space. One pass over the line, every quantifier possessive: linear in its
# length (shlex.split on a whole 1 MiB line took 41-73 s).
_SLOG_PAIR = regex.compile(r'(?<!\S)([A-Za-z_][\w.]*+)=(?:"((?:[^"\\]++|\\.)*+)"|(\S*+))')
_SLOG_ESCAPE = regex.compile(r"\\(.)")
SLOG_VALUE_MAX = 256  # no device name, memory figure or message ollama prints is longer


def _slog(text: str, keys: frozenset[str], start: int = 0) -> dict[str, str]:
    """The values of ``keys`` in the slog record that starts at ``start`` (its msg pair) and ends where the
    next record's time= begins (records run together on one line in pasted logs): the first of each,
    quoted values unescaped and cut to SLOG_VALUE_MAX. Only the keys asked for are kept, so a line of
    any length gives a bounded dict."""
    data: dict[str, str] = {}
    for m in _SLOG_PAIR.finditer(text, start):
        key = m.group(1)
        if key == "time" and m.start() > start:
            break  # the next record
        if key in keys and key not in data:
            quoted = m.group(2)
            # (unescaped after the cut: two raw characters at most per character kept)
            value = _SLOG_ESCAPE.sub(r"\1", quoted[:2 * SLOG_VALUE_MAX]) if quoted is not None else m.group(3)
            data[key] = value[:SLOG_VALUE_MAX]
            if len(data) == len(keys):
                break
    return data


_OFFLOAD_KEYS = frozenset({"msg", "library", "layers.offload", "layers.model", "layers.requested"})
_OFFLOAD_MSG = regex.compile(r'(?<!\S)msg="?offload\b')
_COMPUTE_KEYS = frozenset({"msg", "library", "name", "description", "total", "available", "type"})


def _offload_line(m: regex.Match) -> dict | None:
    """ollama's layer placement: msg="offload to cpu" (2024) or msg=offload library=cpu (2025), layers.offload=N."""
    msg = _OFFLOAD_MSG.search(m.string, 0, m.end())
    data = _slog(m.string, _OFFLOAD_KEYS, msg.start() if msg else 0)
    if not (data.get("msg") or "").startswith("offload"):
        return None
    library = data.get("library") or (data["msg"][len("offload to "):] if data["msg"].startswith("offload to ") else "")
    try:
        offloaded, total = int(data["layers.offload"]), int(data["layers.model"])
    except (KeyError, ValueError):
        return None
    return {"library": library.lower() or None, "offloaded": offloaded, "total": total,
            "requested": data.get("layers.requested")}


def _kv_line(m: regex.Match) -> dict | None:
    """ollama slog: time=... level=INFO source=types.go:130 msg="inference compute" id=0 library=metal ..."""
    data = _slog(m.string, _COMPUTE_KEYS, m.start())
    if data.get("msg") not in ("inference compute", "gpu memory") or "library" not in data:
        return None
    out = {"library": data["library"].lower()}
    for key in ("name", "description", "total", "available", "type"):
        if data.get(key):
            out[key] = data[key]
    return out


# the unified 'llama' binary (llama.cpp #23296, 2026-05) and what each subcommand runs
LLAMA_SUBCOMMANDS = {"serve": "llama-server", "server": "llama-server", "cli": "llama-cli", "bench": "llama-bench",
                     "completion": "llama-completion", "batched-bench": "llama-batched-bench",
                     "perplexity": "llama-perplexity", "quantize": "llama-quantize", "fit-params": "llama-fit-params"}


def program_of_argv(argv: list[str]) -> str | None:
    """The program an argv runs, named as capscan names runs: 'llama serve ...' -> 'llama-server',
    '/opt/homebrew/bin/llama-bench ...' -> 'llama-bench'; None for a command that is none of these."""
    if not argv:
        return None
    exe = argv[0].rsplit("/", 1)[-1]
    if exe == "llama":
        sub = next((a for a in argv[1:] if not a.startswith("-")), None)
        return LLAMA_SUBCOMMANDS.get(sub or "")
    if exe.startswith(("llama-", "whisper-")) or exe == "ollama":
        return exe
    return None


def _command_line(m: regex.Match) -> dict | None:
    argv = m.group("argv").split()
    program = program_of_argv(argv)
    if program is None:
        return None
    data: dict = {"program": program}
    # Llama-macOS runs 'llama serve --models-preset ... --log-file <temp dir>/llama-server.log' with no -lv
    if argv[0].rsplit("/", 1)[-1] == "llama" and "--models-preset" in argv and "--log-file" in argv:
        data["launcher"] = "Llama-macOS"
    return data


def _ollama_runner(m: regex.Match) -> dict:
    engine = "llama-server" if m.group("what") == "llama-server" else "runner"
    return {"cmd": m.group("cmd"), "engine": engine}


_MLX_KEYS = frozenset({"model", "port"})


def _mlx_runner(m: regex.Match) -> dict:
    model = _slog(m.string, _MLX_KEYS, m.start()).get("model") or "?"
    # (the cmd names the model as a runner's does: the load boundary reads '--model')
    return {"cmd": f"mlx runner --model {model}", "engine": "mlx"}


_UNIT = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _model_size(m: regex.Match) -> dict:
    return {"bytes": int(float(m.group("n")) * _UNIT[m.group("unit")])}


SYSTEM = Format(
    name="system",
    description="system_info, load_backend, --list-devices, build target and version, model name, layer offload, "
                "pasted commands and the lines that name today's programs",
    literals=("main: build = ", "build: ", "version: ", "system_info", "load_backend", "Available devices", "built with",
              "general.name", "$ ", " % ", "% /", "% ./", "% llama", "app.llama.Llama", "llama serve ",
              "llama_completion: ", "common_params_print_info: build ", "build      : ",
              "using device",
              "layers to GPU", "model ftype", "file type   =", "model size ", "file size   =",
              "option will be ignored", "use gpu ", "no GPU found", "whisper_model_load: ", "error loading model"),
    patterns=(
        Pattern("process.start", rx(r"^main: build = (?P<number>\d+) \((?P<commit>[0-9a-f]+)\)\s*$")),
        # --version: 'version: 7972 (e06088da0)' until 2026-08, then semantic versions (llama.cpp #27498):
        # 'version: 0.5.0 (build 11146, commit 7fe450e19)'; the build number still orders builds
        Pattern("build.version", rx(r"^version: (?P<number>\d++) \((?P<commit>[0-9a-f]{7,40})\)\s*+$")),
        Pattern("build.version", rx(r"^version: (?P<release>\d++\.\d++\.\d++(?:-[\w.]++)?+) \(build (?P<number>\d++), "
                                    r"commit (?P<commit>[0-9a-f]{7,40})\)\s*+$")),
        # the 2026 llama-cli's banner ('build      : b1-0c1e570', then model, ftype, modalities): its own
        Pattern("build.version", rx(r"^build\s++: b(?P<number>\d++)-(?P<commit>[0-9a-f]{7,40})\s*+$"),
                lambda m: {"number": m.group("number"), "commit": m.group("commit"), "program": "llama-cli"}),
        # a pasted shell command that starts a llama.cpp program: the 2026 unified binary's subcommands
        # ('llama serve', 'llama bench'...) named as the programs they run
        Pattern("command.line", rx(r"^[\w@.:~/()\[\] -]{0,80}?[$%] ++(?:[A-Z_]\w*+=\S*+ ++)*+(?P<argv>(?:[^\s/]*+/)*+"
                                   r"(?:llama|llama-\w[\w-]*+|whisper-\w++|ollama)(?: [^\n]*+)?+)$"), _command_line),
        # llama-completion (2025-12 on: the old llama-cli's completion program, renamed) names its own function
        Pattern("program.named", rx(r"\bllama_completion: (?:llama backend init|load the model)"),
                lambda m: {"program": "llama-completion"}),
        # Llama-macOS (ggml-org's menu-bar app) logs its server's lines under this os_log subsystem
        Pattern("app.llama_macos", rx(r"\bapp\.llama\.Llama\b")),
        # ... and its server's argv as `ps` shows it: 'llama serve --models-preset ... --log-file .../llama-server.log'
        Pattern("app.llama_macos", rx(r"^(?:[^\s/]*+/)*+llama serve (?=[^\n]*?--models-preset )(?=[^\n]*?--log-file )")),
        # llama-bench's last line (md and sql output): closes the run it ends.
        Pattern("build.footer", rx(r"^build: (?P<commit>[0-9a-f]{7,40}) \((?P<number>\d+)\)\s*$")),
        Pattern("system_info", rx(r"system_info: n_threads = (?P<n>\d+)(?: \(n_threads_batch = \d+\))? / \d+ \|(?P<rest>.*)$"),
                _system_info),
        # the 2023-24 server's own log form of the same line (issue 8775's text log; its JSON log, ollama issue 719's
        # runner, is written so by read/normalize.py): 'system info | ... n_threads=4 ... system_info="AVX = 1 | ... "'
        Pattern("system_info", rx(r"\bsystem info \|(?>.*?\bn_threads=)(?P<n>\d++)(?>.*?\bsystem_info=\")"
                                  r"(?P<rest>[^\"]*+)\""), _system_info),
        Pattern("backend.loaded", rx(r"load_backend: loaded (?P<name>\S++) backend from (?P<path>\S(?:.*\S)?+)\s*+$")),
        Pattern("devices.header", rx(r"^Available devices:\s*$"),
                collector=lambda m, n, t: _DeviceListCollector(n, t)),
        # (the CMake form of llama-cli --version, 2026: 'built with AppleClang 17.0.0.17000319 for Darwin x86_64')
        Pattern("build.target", rx(r"^(?>.*?built with )(?P<compiler>.+?) for "
                                   r"(?P<target>[\w.-]++(?: (?:x86_64|arm64|aarch64))?+)\s*+$")),
        # common_init() since 2024-09: LOG_INF("build: %d (%s) with %s for %s%s\n", number, commit, compiler, target,
        # build_type), build_type "" or " (debug)"
        Pattern("build.target", rx(r"^(?>.*?\bbuild: (?P<number>\d++) \((?P<commit>[0-9a-f]++)\) with )(?P<compiler>.+?) "
                                   r"for (?P<target>[\w.-]++(?: (?:x86_64|arm64|aarch64))?+)"
                                   r"(?: \(debug\))?\s*$")),
        # the same line as common_params_print_info prints it in 2026 ('build 1 (0c1e570) with GNU 12.2.0 for Linux
        # x86_64', no colon)
        Pattern("build.target", rx(r"^(?>.*?\bcommon_params_print_info: build (?P<number>\d++) \((?P<commit>[0-9a-f]++)\) "
                                   r"with )(?P<compiler>.+?) for (?P<target>[\w.-]++(?: (?:x86_64|arm64|aarch64))?+)"
                                   r"(?: \(debug\))?\s*$")),
        Pattern("model.name", rx(r"general\.name\s+str\s+=\s+(?P<name>\S(?:.*\S)?+)\s*+$")),
        # the quantization, printed apart from the model name (llm_load_print_meta 2023-24, print_info 2025 on)
        Pattern("model.ftype", rx(r"(?:llm_load_print_meta: model ftype|print_info: file type)\s+=\s+"
                                  r"(?P<ftype>\S(?:.*\S)?+)\s*+$")),
        # the weights' size (llm_load_print_meta 2023-24, print_info 2025 on): with the host's bandwidth, the
        # ceiling on token generation (rules: reference)
        Pattern("model.size", rx(r"(?:llm_load_print_meta: model size|print_info: file size)\s+=\s+"
                                 r"(?P<n>\d+(?:\.\d+)?) (?P<unit>[KMGT])i?B\b"), _model_size),
        Pattern("model.device",
                rx(r"using device (?P<device>\S++) \((?P<description>[^()]*+(?:\([^()]*+\))?+[^()]*+)\)")),
        # The process runs on the CPU whatever was asked: llama.cpp's argument parser (2023 '--n-gpu-layers',
        # 2024 '--gpu-layers', 2025 on 'no usable GPU found'), printed before 'main: build ='; whisper.cpp's
        # 'use gpu = 0' (-ng) and its GPU backend search finding nothing.
        # (the 2023-24 server's own wording, capitalised, in its JSON or text log: 'Not compiled with ...')
        Pattern("gpu.disabled", rx(r"(?P<why>[Nn]ot compiled with GPU offload support|no usable GPU found), "
                                   r"--(?:n-)?gpu-layers option will be ignored"),
                lambda m: {"why": m.group("why").lower().replace("no usable gpu", "no usable GPU")
                           .replace("gpu offload", "GPU offload")}),
        Pattern("gpu.disabled", rx(r"^(?>.*?\bwhisper_\w++: )(?P<why>use gpu) ++= 0\s*+$")),
        Pattern("gpu.disabled", rx(r"^(?>.*?whisper_backend_init_gpu: )(?P<why>no GPU found)\s*+$")),
        # whisper.cpp's model weights, on the backend that holds them (1.5 'CPU buffer size', 1.7 on 'CPU total
        # size'; 'Metal', 'CUDA0', 'Vulkan0' when a GPU does)
        Pattern("whisper.weights", rx(r"^(?>.*?whisper_model_load: +)(?P<backend>\w+) (?:buffer|total) size +=")),
        # the model never loaded (out of GPU memory, a bad file): nothing ran, whatever the device
        Pattern("model.load_failed", rx(r"\berror loading model: (?P<why>\S(?:.*\S)?+)\s*+$")),
        Pattern("offload", rx(r"offloaded (?P<offloaded>\d+)/(?P<total>\d+) layers to GPU"),
                lambda m: {"offloaded": int(m.group("offloaded")), "total": int(m.group("total"))}),
    ),
    samples=(
        Sample("main: build = 1015 (226255b)", "process.start", {"number": "1015", "commit": "226255b"}),
        Sample("0.00.003.321 I llama_completion: llama backend init", "program.named", {"program": "llama-completion"}),
        Sample("version: 0.5.0-dev (build 1, commit 0c1e570)", "build.version",
               {"release": "0.5.0-dev", "number": "1", "commit": "0c1e570"}),
        Sample("built with GNU 12.2.0 for Linux x86_64", "build.target", {"target": "Linux x86_64"}),
        Sample("build      : b1-0c1e570", "build.version", {"number": "1", "commit": "0c1e570", "program": "llama-cli"}),
        Sample("Loading model... |0.00.004.760 I cmn  common_param: common_params_print_info: build 1 (0c1e570) with GNU "
               "12.2.0 for Linux x86_64", "build.target", {"number": "1", "commit": "0c1e570", "target": "Linux x86_64"}),
        Sample("version: 7972 (e06088da0)", "build.version", {"number": "7972", "commit": "e06088da0"}),
        Sample("version: 0.5.0 (build 11146, commit 7fe450e19)", "build.version",
               {"release": "0.5.0", "number": "11146", "commit": "7fe450e19"}),
        Sample("built with AppleClang 21.0.0.21000334 for Darwin arm64", "build.target", {"target": "Darwin arm64"}),
        Sample("$ llama serve -m ~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf --port 8080", "command.line",
               {"program": "llama-server"}),
        Sample("runner@Mac-1760000000 ~ % GGML_METAL_DEVICES=0 /opt/homebrew/bin/llama bench -m m.gguf -p 64 -n 32",
               "command.line", {"program": "llama-bench"}),
        Sample("$ ./build/bin/llama-completion -m m.gguf -p hello -n 16", "command.line",
               {"program": "llama-completion"}),
        Sample("$ /Applications/Llama.app/Contents/MacOS/llama serve --models-preset /tmp/models.ini "
               "--log-file /var/folders/7k/T/llama-server.log --port 2276 --models-max 1",
               "command.line", {"program": "llama-server", "launcher": "Llama-macOS"}),
        Sample("/Applications/Llama.app/Contents/MacOS/llama serve --models-preset /Users/rae/Library/Application "
               "Support/Llama/models.ini --log-file /var/folders/7k/T/llama-server.log --port 2276", "app.llama_macos", {}),
        Sample("2026-10-07 10:11:12.123456-0700 0x2c1f Default 0x0 812 0 Llama: [app.llama.Llama:server] llama-server: "
               "srv  load_model: loading model preset", "app.llama_macos", {}),
        Sample("llm_load_print_meta: model ftype      = Q4_K - Medium", "model.ftype", {"ftype": "Q4_K - Medium"}),
        Sample("print_info: file type   = Q4_K - Medium", "model.ftype", {"ftype": "Q4_K - Medium"}),
        Sample("llm_load_print_meta: model size       = 636.18 MiB (4.85 BPW) ", "model.size", {"bytes": 667083079}),
        Sample("print_info: file size   = 3.56 GiB (4.54 BPW)", "model.size", {"bytes": 3822520893}),
        Sample("build: ee3d1b54c (10167)", "build.footer", {"commit": "ee3d1b54c", "number": "10167"}),
        Sample("system_info: n_threads = 24 (n_threads_batch = 24) / 32 | Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | "
               "ARM_FMA = 1 | ACCELERATE = 1 | REPACK = 1 |", "system_info", {"n_threads": 24, "backends": ["Metal", "CPU"]}),
        Sample("system_info: n_threads = 4 (n_threads_batch = 4) / 4 | AVX = 1 | AVX2 = 1 | NEON = 0 | BLAS = 1 | ",
               "system_info", {"n_threads": 4, "backends": []}),
        Sample('INFO [                    main] system info | tid="0x105428580" timestamp=1722350460 n_threads=4 '
               'n_threads_batch=-1 total_threads=8 system_info="AVX = 1 | AVX2 = 1 | FMA = 1 | NEON = 0 | F16C = 1 | '
               'SSE3 = 1 | "', "system_info", {"n_threads": 4, "backends": []}),
        Sample('{"timestamp":1696624423,"level":"INFO","function":"main","line":1196,"message":"system info",'
               '"n_threads":8,"total_threads":10,"system_info":"AVX = 1 | AVX2 = 1 | FMA = 1 | NEON = 0 | F16C = 1 | '
               'SSE3 = 1 | "}', "system_info", {"n_threads": 8, "backends": []}),
        Sample("load_backend: loaded Metal backend from /opt/homebrew/lib/libggml-metal.so", "backend.loaded",
               {"name": "Metal"}),
        Sample("Available devices:", "devices.header", {}),
        Sample("  MTL0: Apple Paravirtual device (11453 MiB, 11453 MiB free)", "devices.item",
               {"id": "MTL0", "description": "Apple Paravirtual device", "total_mib": 11453}, via=DEVICE_ITEM),
        Sample("  Metal: Apple M2 Max (49152 MiB, 49151 MiB free)", "devices.item",
               {"id": "Metal", "description": "Apple M2 Max", "free_mib": 49151}, via=DEVICE_ITEM),
        Sample("  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23512 MiB free)", "devices.item",
               {"id": "CUDA0", "description": "NVIDIA GeForce RTX 4090"}, via=DEVICE_ITEM),
        Sample("  Vulkan0: AMD Radeon RX 5700 XT (RADV NAVI10) (8176 MiB, 8176 MiB free)", "devices.item",
               {"id": "Vulkan0", "description": "AMD Radeon RX 5700 XT (RADV NAVI10)"}, via=DEVICE_ITEM),
        Sample("built with AppleClang 17.0.0.17000319 for Darwin x86_64", "build.target", {"target": "Darwin x86_64"}),
        Sample("main: built with Apple clang version 16.0.0 (clang-1600.0.26.6) for x86_64-apple-darwin23.6.0",
               "build.target", {"target": "x86_64-apple-darwin23.6.0"}),
        Sample("build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0",
               "build.target", {"target": "x86_64-apple-darwin23.4.0", "number": "4240", "commit": "1a2b3c4d"}),
        # (2026 builds name the target as CMake does, as their --version does)
        Sample("build: 11146 (7fe450e19) with AppleClang 21.0.0.21000334 for Darwin arm64", "build.target",
               {"target": "Darwin arm64", "number": "11146", "commit": "7fe450e19"}),
        Sample("build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0",
               "build.target", {"target": "arm64-apple-darwin24.6.0"}),
        Sample("0.00.000.021 I build: 7001 (5be2c8aa1) with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu (debug)",
               "build.target", {"target": "x86_64-linux-gnu"}),
        Sample("llama_model_loader: - kv   2:                               general.name str              = TinyLlama",
               "model.name", {"name": "TinyLlama"}),
        Sample("llama_model_load_from_file_impl: using device MTL0 (Apple M2 Max) (unknown id) - 21845 MiB free",
               "model.device", {"device": "MTL0", "description": "Apple M2 Max"}),
        Sample("load_tensors: offloaded 0/23 layers to GPU", "offload", {"offloaded": 0, "total": 23}),
        Sample("warning: not compiled with GPU offload support, --n-gpu-layers option will be ignored", "gpu.disabled",
               {"why": "not compiled with GPU offload support"}),
        Sample("warning: not compiled with GPU offload support, --gpu-layers option will be ignored", "gpu.disabled",
               {"why": "not compiled with GPU offload support"}),
        Sample('{"timestamp":1699283193,"level":"WARNING","function":"server_params_parse","line":873,"message":"Not '
               'compiled with GPU offload support, --n-gpu-layers option will be ignored. See main README.md for '
               'information on enabling GPU BLAS support","n_gpu_layers":-1}', "gpu.disabled",
               {"why": "not compiled with GPU offload support"}),
        Sample("WARN [server_params_parse] Not compiled with GPU offload support, --n-gpu-layers option will be ignored. "
               "See main README.md for information on enabling GPU BLAS support | n_gpu_layers=-1 tid=\"0x1f0\" "
               "timestamp=1712345678", "gpu.disabled", {"why": "not compiled with GPU offload support"}),
        Sample("warning: no usable GPU found, --gpu-layers option will be ignored", "gpu.disabled",
               {"why": "no usable GPU found"}),
        Sample("llama_model_load: error loading model: unable to allocate backend buffer", "model.load_failed",
               {"why": "unable to allocate backend buffer"}),
        Sample("whisper_init_with_params_no_state: use gpu    = 0", "gpu.disabled", {"why": "use gpu"}),
        Sample("whisper_backend_init_gpu: no GPU found", "gpu.disabled", {"why": "no GPU found"}),
        Sample("whisper_model_load:      CPU buffer size =   149.41 MB", "whisper.weights", {"backend": "CPU"}),
        Sample("whisper_model_load:          CPU total size =   487.01 MB", "whisper.weights", {"backend": "CPU"}),
        Sample("whisper_model_load:    Metal total size =   147.37 MB", "whisper.weights", {"backend": "Metal"}),
    ),
)

OLLAMA = Format(
    name="ollama",
    description="ollama server.log device summary (msg=\"inference compute\" library=metal|cpu|cuda|rocm)",
    literals=("inference compute", "layers.offload=", "msg=\"starting ", "msg=\"gpu memory\""),
    # anchored on its slog shape: the msg pair itself, not the words anywhere in a line
    patterns=(Pattern("ollama.compute", rx(r'(?<!\S)msg="inference compute"(?!\S)'), _kv_line),
              # 0.30 on: the scheduler's per-GPU line, 'msg="gpu memory" id=0 library=Vulkan available="31.9 GiB"'
              Pattern("ollama.compute", rx(r'(?<!\S)msg="gpu memory"(?!\S)'), _kv_line),
              Pattern("ollama.offload", rx(r"^(?>.*?msg=\"?offload\b).*?layers\.offload=\d"), _offload_line),
              # each model load starts a runner process (0.1.3x-0.5 'starting llama server', 0.9+ 'starting runner',
              # 0.30+ upstream 'starting llama-server', whose own lines follow raw and unprefixed)
              Pattern("ollama.runner", rx(r"msg=\"starting (?P<what>llama server|runner|llama-server)\" "
                                          r"cmd=\"(?P<cmd>[^\"]++)"), _ollama_runner),
              # 0.30+: safetensors models load in the MLX engine, which never reads the Metal family
              Pattern("ollama.runner", rx(r"msg=\"starting mlx runner subprocess\""), _mlx_runner)),
    samples=(
        Sample('time=2025-02-16T20:51:57.943-06:00 level=INFO source=types.go:130 msg="inference compute" id=0 '
               'library=metal variant="" compute="" driver=0.0 name="" total="16.0 GiB" available="16.0 GiB"',
               "ollama.compute", {"library": "metal", "total": "16.0 GiB"}),
        Sample('time=2025-05-01T10:00:00.000Z level=INFO source=types.go:130 msg="inference compute" id=cpu '
               'library=cpu compute="" name=cpu description=cpu total="15.5 GiB" available="12.0 GiB"',
               "ollama.compute", {"library": "cpu"}),
        Sample('time=2026-08-29T08:45:23.466Z level=INFO source=sched.go:620 msg="gpu memory" id=0 library=Vulkan '
               'available="31.9 GiB" free="32.3 GiB" minimum="457.0 MiB" overhead="0 B"', "ollama.compute",
               {"library": "vulkan"}),
        Sample('time=2024-08-21T14:03:40.112Z level=INFO source=memory.go:309 msg="offload to cpu" layers.requested=-1 '
               'layers.model=29 layers.offload=0 layers.split="" memory.available="[6.8 GiB]"', "ollama.offload",
               {"library": "cpu", "offloaded": 0, "total": 29}),
        Sample('time=2025-04-02T08:15:31.779-04:00 level=INFO source=server.go:138 msg=offload library=cpu '
               'layers.requested=0 layers.model=29 layers.offload=0 layers.split="" memory.available="[9.1 GiB]"',
               "ollama.offload", {"library": "cpu", "offloaded": 0, "total": 29, "requested": "0"}),
        Sample('time=2025-02-16T20:52:03.516-06:00 level=INFO source=server.go:380 msg="starting llama server" '
               'cmd="/Applications/Ollama.app/Contents/Resources/ollama runner --model /Users/rae/.ollama/models/blobs/'
               'sha256-dde5aa3fc5ff --ctx-size 8192"', "ollama.runner",
               {"cmd": "/Applications/Ollama.app/Contents/Resources/ollama runner --model /Users/rae/.ollama/models/"
                       "blobs/sha256-dde5aa3fc5ff --ctx-size 8192", "engine": "runner"}),
        Sample('time=2026-10-02T14:21:07.532+02:00 level=INFO source=llama_server.go:412 msg="starting llama-server" '
               'cmd="/opt/homebrew/Cellar/ollama/0.30.4/libexec/llama-server --model /Users/rae/.ollama/models/blobs/'
               'sha256-6a0746a1ec1a --port 50123 --log-verbosity 4 --no-log-prefix --no-log-timestamps"',
               "ollama.runner", {"engine": "llama-server"}),
        Sample('time=2026-10-02T14:25:40.101+02:00 level=INFO source=runner.go:118 msg="starting mlx runner subprocess" '
               'model=qwen3:4b-mlx port=50188', "ollama.runner", {"engine": "mlx", "cmd": "mlx runner --model qwen3:4b-mlx"}),
    ),
)
