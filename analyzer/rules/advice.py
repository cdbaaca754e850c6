"""What to run next to get the evidence a diagnosis lacks: shared by the engine's next steps and the
rules' own (analyzer.rules.catalog), so neither imports the other."""

from __future__ import annotations

from analyzer.rules.view import RunView


def evidence_advice(view: RunView) -> str:
    """What to run to get the capability block, for the program and era the log shows (issue 22): the
    flag that prints it, never a generic "pipe the full stderr" to someone who already did."""
    f = view.facts
    program = f.program or ""
    kinds = {e.kind for e in view.evidence}
    if view.on_a_mac is False:
        return device_advice(view)  # no Metal block to ask for on a Linux, Windows or Android log
    if f.launcher == "Llama-macOS":
        return ("The Llama app (ggml-org's Llama-macOS) starts `llama serve` without a verbosity flag, so its "
                "llama-server.log has no Metal capability block: add `-lv 4` to the app's extra server arguments "
                "(its `extraServerArgs` setting), restart the server from the menu bar, load a model, then "
                "`capscan ingest` that log (in the system temp folder); in a macOS guest, `capscan probe` answers too.")
    if program == "koboldcpp":
        return ("koboldcpp prints llama.cpp's device lines in its console while it loads the model: copy the "
                "console from the start (`koboldcpp --model MODEL 2>&1 | capscan`, `--debugmode` for more), not only "
                "the speed lines; in a macOS guest, `capscan probe` answers too.")
    if program in ("llama-cli", "llama-server", "llama-completion") or "timing.pair" in kinds:
        return ("Since 2026-05 llama-cli and llama-server hide the Metal capability block at their default "
                "verbosity: run the same command with `-lv 4` (or `-v`) and `2>&1`, or `llama-cli --list-devices`, "
                "and pipe that into capscan; in a macOS guest, `capscan probe` answers too.")
    if program == "llama-bench":
        return ("llama-bench prints the Metal block on stderr: `llama-bench -m MODEL -o json 2>&1 | capscan` (the "
                "JSON's cpu_info also names the host chip).")
    if program == "ollama" and f.ollama_engine == "llama-server":
        return ("ollama 0.30 and later runs upstream llama-server and copies its device lines into server.log "
                "without OLLAMA_DEBUG: load the model once (`ollama run MODEL hi`), then `capscan ingest "
                "~/.ollama/logs/server.log` (the app's log; `ollama serve` prints to its terminal) and read the "
                "device lines of that load (`ggml_metal_device_init:` on a Mac).")
    if program == "ollama":
        return ("ollama before 0.30 prints the device lines in its server log only at debug level: restart it with "
                "`OLLAMA_DEBUG=1 ollama serve` (0.30 and later print them without it), "
                "load the model once, then `capscan ingest ~/.ollama/logs/server.log` (the app's log; `ollama serve` "
                "prints to its terminal).")
    if program == "whisper.cpp":
        return ("whisper.cpp prints its Metal init lines on stderr: `whisper-cli -m MODEL -f AUDIO 2>&1 | capscan`.")
    return START_UP_BLOCK


def device_advice(view: RunView) -> str:
    """What to run to see whether a GPU was used, when only system_info speaks (it never names Vulkan, SYCL,
    OpenCL, CANN or WebGPU): the verbosity flag or the device listing of the program the log shows."""
    program = view.facts.program or ""
    if program == "ollama":
        return ("Restart the server with `OLLAMA_DEBUG=1 ollama serve`, load the model once, and pipe its log into "
                "capscan: its `inference compute` line names the GPU (or library=cpu); `ollama ps` shows the "
                "PROCESSOR column (`100% GPU` / `100% CPU`).")
    if program == "whisper.cpp":
        return ("Pipe the whole output into capscan (`whisper-cli -m MODEL -f AUDIO 2>&1 | capscan`): its "
                "`whisper_backend_init_gpu:` line says which GPU backend it used, or that it found none.")
    if program == "koboldcpp":
        return ("Copy koboldcpp's console from the start (`koboldcpp --model MODEL 2>&1 | capscan`): its device and "
                "`offloaded N/M layers` lines say whether a GPU was used.")
    return ("To see whether a GPU was used, run the same command with `-lv 4` (llama.cpp of 2026; `--verbose` on "
            "older builds) and `2>&1`, or `llama-cli --list-devices`, and pipe that into capscan: the device list "
            "and the `offloaded N/M layers` line decide it.")


START_UP_BLOCK = ("Paste the start-up block too: the ggml_metal_device_init: (or ggml_metal_init:) lines printed before "
                  "the model loads (llama-bench prints them; llama-cli/llama-server need -v), or run `capscan probe` "
                  "on the same machine, then pipe it into capscan.")


CONFIRM_HOST = ("run `capscan probe` in the guest (it reads the CPU brand string), or `llama-bench -o json` "
                "(its cpu_info names the host chip), then pipe the result into capscan (the remedy itself also checks "
                "the live guest before it launches)")
