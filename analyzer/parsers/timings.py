"""Throughput lines printed at the end of a run: llama.cpp's timing blocks of
every era, llama-server slots and JSON ``timings``, ollama --verbose, mlx_lm,
whisper.cpp. Locale commas and ``inf`` are read as printed; every prompt and
generation rate then passes analyzer.parsers.plausible (a timing line names
neither chip nor model size: the absolute caps), so an ``inf``, ``nan``,
negative or zero rate for tokens processed is refused and counted."""

from __future__ import annotations

import json
import math

import regex

from analyzer.parsers import plausible
from analyzer.parsers.base import (
    REJECTED_KEY,
    Format,
    Pattern,
    Rejected,
    Sample,
    fits_sqlite,
    rx,
    to_float,
    to_int,
)

_NUM = r"[-\d.,]+|inf|-?nan"


def _phase(word: str) -> str:
    word = word.lower()
    if word.startswith("prompt"):
        return "prompt"
    if word in ("eval", "generation eval", "generation"):
        return "eval"
    return "sample"


def _rate(text: str | None) -> float | None:
    """A printed rate: as ``to_float`` reads it, and ``nan``/``-nan`` as NaN (for the check to refuse)."""
    if text is not None and text.strip().lower() in ("nan", "-nan"):
        return math.nan
    return to_float(text)


def _checked(phase: str, tok_s: float | None, tokens: int | None = None) -> float | None:
    """A prompt or generation rate through the one check (sampling rates are not throughput)."""
    if phase == "sample" or tok_s is None:
        return tok_s
    return plausible.check(tok_s, tokens, plausible.MAX_PROMPT_TOK_S if phase == "prompt" else plausible.MAX_GEN_TOK_S,
                           f"{phase} rate")


def _llama_timing(m: regex.Match) -> dict | None:
    phase, tokens = _phase(m.group("phase")), to_int(m.group("n"))
    tps = _checked(phase, _rate(m.group("tps")), tokens)
    if tps is None or math.isnan(tps):
        return None
    func = m.group("func") or ""
    return {
        "phase": phase,
        "tok_s": tps,
        "tokens": tokens,
        "ms": to_float(m.group("ms")),
        "source": func.rstrip(":").strip() or "server-slot",
    }


def _both(p: float | None, g: float | None, p_n: int | None = None, g_n: int | None = None) -> tuple:
    """A line's prompt and generation rates, each checked: a refused one is left out and counted
    (``REJECTED_KEY``), the other stands; both refused, the line is."""
    refused = 0
    try:
        p = _checked("prompt", p, p_n)
    except Rejected:
        p, refused = None, refused + 1
    try:
        g = _checked("eval", g, g_n)
    except Rejected:
        g, refused = None, refused + 1
    if refused and p is None and g is None:
        raise Rejected("no plausible rate on the line", refused)
    return p, g, ({REJECTED_KEY: refused} if refused else {})


def _pair(prompt: str, gen: str, source: str):
    def build(m: regex.Match) -> dict | None:
        p, g, refused = _both(_rate(m.group(prompt)), _rate(m.group(gen)))
        if p is None and g is None:
            return None
        return {"prompt_tok_s": p, "eval_tok_s": g, "source": source, **refused}
    return build


def _server_timings(m: regex.Match) -> dict | None:
    """A one-line llama-server JSON ``"timings":{...}`` object: both rates and their token counts."""
    try:
        obj = json.loads("{" + m.group("body") + "}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None

    def num(key: str) -> float | None:
        v = obj.get(key)
        if type(v) is int and not fits_sqlite(v):
            return None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def count(key: str) -> int | None:
        v = obj.get(key)
        return v if type(v) is int and fits_sqlite(v) else None

    p, g, refused = _both(num("prompt_per_second"), num("predicted_per_second"), count("prompt_n"),
                          count("predicted_n"))
    if p is None and g is None:
        return None
    # prompt_ms: a streamed request's chunks all carry its prompt's one timing (runs.timings tells them apart)
    return {"prompt_tok_s": p, "eval_tok_s": g, "prompt_n": count("prompt_n"), "eval_n": count("predicted_n"),
            "prompt_ms": num("prompt_ms"), "source": "server-json", **refused}


def _single(m: regex.Match, phase: str, source: str, tokens: int | None = None) -> dict | None:
    """One rate on its line (server JSON key, ollama, mlx_lm), checked; its token count when printed with it."""
    tps = _checked(phase, _rate(m.group("tps")), tokens)
    if tps is None or math.isnan(tps):
        return None
    out = {"phase": phase, "tok_s": tps, "source": source}
    if tokens is not None:
        out["tokens"] = tokens
    return out


def _running(m: regex.Match) -> dict | None:
    """A streaming slot's running generation rate, with its task and the tokens decoded so far."""
    out = _single(m, "eval", "server-running", to_int(m.group("n")))
    return {**out, "task": m.group("task")} if out else None


def _count(phase_group: str):
    def build(m: regex.Match) -> dict | None:
        n = to_int(m.group("n"))
        if n is None:
            return None
        key = m.group(phase_group)
        return {"phase": "prompt" if key.startswith("prompt") else "eval", "tokens": n}
    return build


TIMINGS = Format(
    name="timings",
    description="timing lines: llama_print_timings, llama_perf_context_print, common_perf_print, llama-server slots and "
                "JSON timings, ollama --verbose, mlx_lm, new llama-cli, whisper_print_timings",
    literals=("per second", "per_second", "print_timing", "rate:", "-per-sec", "_tps", "t/s ]", "eval count:",
              '"prompt_n"', '"predicted_n"', "prompt_tokens=", "Output generated in ", "ms/T = ", "Speed: ",
              ",koboldcpp"),
    patterns=(
        # One-line server JSON: both rates with their counts (before the single-key pattern below).
        Pattern("timing.pair", rx(r'"timings"\s*:\s*\{(?P<body>[^{}]*)\}'), _server_timings),
        Pattern(
            "timing",
            rx(
                r"(?:\b(?P<func>\w++):\s+)?(?P<phase>prompt eval|generation eval|eval|sample|sampling) time\s*=\s*"
                rf"(?P<ms>{_NUM}) ms(?:\s*/\s*(?P<n>\d+) (?:runs|tokens))?\s*\(\s*(?:{_NUM}) ms per (?:token|run),\s*"
                rf"(?P<tps>{_NUM}) tokens per second\)"
            ),
            _llama_timing,
        ),
        # A streaming slot's running rate (LM Studio's llama.cpp engine at debug level): 'n_decoded = 1132,
        # tg = 3.65 t/s' over the generation so far; runs.timings keeps the task's last
        Pattern("timing", rx(rf"slot print_timing: id\s+(?P<slot>\d+) \| task (?P<task>\d+) \|\s*n_decoded\s*=\s*"
                             rf"(?P<n>\d+),\s*tg\s*=\s*(?P<tps>{_NUM})\s*t/s"),
                lambda m: _running(m)),
        Pattern("server.slot", rx(r"slot print_timing: id\s+(?P<slot>\d+) \| task (?P<task>\d+) \|")),
        Pattern(
            "timing",
            rx(rf'"(?P<key>prompt_per_second|predicted_per_second)"\s*:\s*(?P<tps>{_NUM}|null)'),
            lambda m: _single(m, "prompt" if m.group("key").startswith("prompt") else "eval", "server-json"),
        ),
        # Token counts printed on their own line before the rate (ollama --verbose, multi-line server JSON).
        Pattern("timing.count", rx(r"^(?P<phase>prompt eval|eval) count:\s+(?P<n>\d+) token"), _count("phase")),
        Pattern("timing.count", rx(r'"(?P<key>prompt_n|predicted_n)"\s*:\s*(?P<n>\d+)\s*,?\s*$'), _count("key")),
        # mlx_lm.benchmark: the counts of the trials and averages that follow.
        Pattern("timing.setup", rx(r"Timing with prompt_tokens=(?P<p>\d+), generation_tokens=(?P<g>\d+)"),
                lambda m: {"prompt_n": int(m.group("p")), "eval_n": int(m.group("g"))}),
        Pattern("timing.trial",
                rx(rf"^Trial (?P<trial>\d+):\s+prompt_tps\s*[=:]\s*(?P<p>{_NUM}),?\s+generation_tps\s*[=:]\s*(?P<g>{_NUM})"),
                lambda m: {"trial": int(m.group("trial")), **(_pair("p", "g", "mlx_lm")(m) or {})}),
        # (as pasted in a markdown comment, bold: 'eval rate:            **13.08 tokens/s**')
        Pattern("timing", rx(rf"^(?P<phase>prompt eval|eval) rate:\s+(?:\*\*)?(?P<tps>{_NUM}) tokens/s"),
                lambda m: _single(m, _phase(m.group("phase")), "ollama")),
        Pattern("timing", rx(rf"^(?P<phase>Prompt|Generation): (?P<n>\d+) tokens, (?P<tps>{_NUM}) tokens-per-sec"),
                lambda m: _single(m, _phase(m.group("phase")), "mlx_lm", to_int(m.group("n")))),
        Pattern("timing.pair", rx(rf"prompt_tps\s*[=:]\s*(?P<p>{_NUM}),?\s+generation_tps\s*[=:]\s*(?P<g>{_NUM})"),
                _pair("p", "g", "mlx_lm")),
        Pattern("timing.pair", rx(rf"\[ Prompt: (?P<p>{_NUM}) t/s \| Generation: (?P<g>{_NUM}) t/s \]"),
                _pair("p", "g", "llama-cli")),
        # text-generation-webui, per reply: the generation rate and its token count (", context N" since 2023-03,
        # ", seed N" later); the prompt's time is inside the seconds, so the line gives no prompt rate.
        Pattern("timing", rx(rf"\bOutput generated in (?:{_NUM}) seconds \((?P<tps>{_NUM}) tokens/s, (?P<n>\d++) tokens\b"),
                lambda m: _single(m, "eval", "webui", to_int(m.group("n")))),
        # koboldcpp, per reply ('CtxLimit: 3768/4096, Process:0.44s (442.0ms/T = 2.26T/s), Generate:...'; the Total
        # rate, both phases: parsers.wrappers, a test of its own), its --benchmark summary lines ('ProcessingSpeed: 625.75T/s'),
        # and that benchmark's CSV row (Timestamp,Backend,Layers,Model,MaxCtx,GenAmount,ProcessingTime,
        # ProcessingSpeed,GenerationTime,GenerationSpeed,TotalTime,...), whose backend is koboldcpp's library
        Pattern("timing.pair", rx(rf"\bProcess:\s*+(?:{_NUM})s \((?:{_NUM})ms/T = (?P<p>{_NUM})T/s\),\s*+"
                                  rf"Generate:\s*+(?:{_NUM})s \((?:{_NUM})ms/T = (?P<g>{_NUM})T/s\)"),
                _pair("p", "g", "koboldcpp")),
        Pattern("timing", rx(rf"^\s*+(?P<phase>Processing|Generation)Speed:\s*+(?P<tps>{_NUM})\s*+T/s\s*+$"),
                lambda m: _single(m, "prompt" if m.group("phase") == "Processing" else "eval", "koboldcpp")),
        Pattern("timing.pair", rx(r"^\d{4}-\d\d-\d\d [\d:.+]++,koboldcpp\w*+(?:\.dll|\.so|\.dylib)?+,-?\d++,[^,]*+,"
                                  r"\d++,\d++,[\d.]++,(?P<p>[\d.]++),[\d.]++,(?P<g>[\d.]++),"),
                _pair("p", "g", "koboldcpp")),
        Pattern("whisper.timing", rx(rf"whisper_print_timings:\s+(?P<phase>\w+) time\s*=\s*(?P<ms>{_NUM}) ms"),
                lambda m: {"phase": m.group("phase"), "ms": to_float(m.group("ms"))}),
    ),
    samples=(
        Sample("llama_perf_context_print: prompt eval time =     626.56 ms /    10 tokens (   62.66 ms per token,    15.96 "
               "tokens per second)", "timing", {"phase": "prompt", "tok_s": 15.96, "tokens": 10,
                                                "source": "llama_perf_context_print"}),
        Sample("llama_print_timings:        eval time =    7262,21 ms /    99 runs   (   73,36 ms per token,    13,77 tokens "
               "per second)", "timing", {"phase": "eval", "tok_s": 13.77, "tokens": 99}),
        # 0.00 ms measured for a token: no speed, refused (and counted)
        Sample("llama_print_timings: prompt eval time =       0.00 ms /     1 tokens (    0.00 ms per token,      inf tokens "
               "per second)", "timing", {}, rejected=True),
        Sample("       eval time =     572.42 ms /    50 tokens (   11.45 ms per token,    87.35 tokens per second)", "timing",
               {"phase": "eval", "tok_s": 87.35, "source": "server-slot"}),
        Sample("slot print_timing: id  0 | task 0 | ", "server.slot", {"slot": "0", "task": "0"}),
        Sample(" 52.56.061.034 I slot print_timing: id  0 | task 0 | n_decoded =   1132, tg =   3.65 t/s", "timing",
               {"phase": "eval", "tok_s": 3.65, "tokens": 1132, "task": "0", "source": "server-running"}),
        Sample('"timings":{"prompt_n":12,"prompt_ms":46.19,"prompt_per_token_ms":3.85,"prompt_per_second":259.79}',
               "timing.pair", {"prompt_tok_s": 259.79, "prompt_n": 12, "source": "server-json"}),
        Sample('{"content":"...","timings":{"prompt_n":14,"prompt_per_second":443.64,"predicted_n":12,'
               '"predicted_per_second":86.19}}', "timing.pair",
               {"prompt_tok_s": 443.64, "eval_tok_s": 86.19, "prompt_n": 14, "eval_n": 12}),
        Sample('    "prompt_per_second": 443.64166429001494,', "timing",
               {"phase": "prompt", "tok_s": 443.64166429001494, "source": "server-json"}),
        Sample('    "predicted_n": 12,', "timing.count", {"phase": "eval", "tokens": 12}),
        Sample("prompt eval count:    15 token(s)", "timing.count", {"phase": "prompt", "tokens": 15}),
        Sample("Timing with prompt_tokens=512, generation_tokens=128, batch_size=1.", "timing.setup",
               {"prompt_n": 512, "eval_n": 128}),
        Sample("Trial 1:  prompt_tps=1662.104, generation_tps=172.331, peak_memory=1.942, total_time=1.051", "timing.trial",
               {"trial": 1, "prompt_tok_s": 1662.104, "eval_tok_s": 172.331}),
        Sample("Averages: prompt_tps=1656.550, generation_tps=172.090, peak_memory=1.942", "timing.pair",
               {"prompt_tok_s": 1656.55, "eval_tok_s": 172.09, "source": "mlx_lm"}),
        Sample("eval rate:            8.12 tokens/s", "timing", {"phase": "eval", "tok_s": 8.12, "source": "ollama"}),
        Sample("eval rate:            **13.08 tokens/s**", "timing", {"phase": "eval", "tok_s": 13.08, "source": "ollama"}),
        Sample("Generation: 100 tokens, 30.501 tokens-per-sec", "timing", {"phase": "eval", "tok_s": 30.501,
                                                                          "source": "mlx_lm"}),
        Sample("[ Prompt: 45.3 t/s | Generation: 12.1 t/s ]", "timing.pair", {"prompt_tok_s": 45.3, "eval_tok_s": 12.1}),
        # (with its Total, the line is analyzer.parsers.wrappers': the Total is a figure of its own test)
        Sample("CtxLimit:1277/8192, Amt:200/200, Init:0.01s, Process:1.55s (1.4ms/T = 697.13T/s), Generate:8.87s "
               "(44.4ms/T = 22.54T/s)", "timing.pair",
               {"prompt_tok_s": 697.13, "eval_tok_s": 22.54, "source": "koboldcpp"}),
        Sample("ProcessingSpeed: 625.75T/s", "timing", {"phase": "prompt", "tok_s": 625.75, "source": "koboldcpp"}),
        Sample("GenerationSpeed: 19.89T/s", "timing", {"phase": "eval", "tok_s": 19.89}),
        Sample("2024-06-19 21:46:13.064748+00:00,koboldcpp_cublas.dll,81,Llama-3-70B-Instruct-abliterated-v3_q6,8192,100,"
               "79.72,101.50,15.95,6.27,95.67", "timing.pair", {"prompt_tok_s": 101.5, "eval_tok_s": 6.27}),
        Sample("2024-11-02 10:11:12.5+00:00,koboldcpp_vulkan.so,99,gemma-2-9b-it-Q6_K,4096,100,3.10,1290.32,4.02,24.88,"
               "7.12,,", "timing.pair", {"prompt_tok_s": 1290.32, "eval_tok_s": 24.88}),
        Sample("Output generated in 163.82 seconds (0.39 tokens/s, 64 tokens, context 1623, seed 1809972029)", "timing",
               {"phase": "eval", "tok_s": 0.39, "tokens": 64, "source": "webui"}),
        Sample("Output generated in 4.07 seconds (2.21 tokens/s, 9 tokens, context 1848)", "timing",
               {"phase": "eval", "tok_s": 2.21, "tokens": 9, "source": "webui"}),
        Sample("2023-03-20 11:08:51 INFO:Output generated in 11.08 seconds (13.90 tokens/s, 154 tokens)", "timing",
               {"phase": "eval", "tok_s": 13.9, "tokens": 154, "source": "webui"}),
        Sample("whisper_print_timings:   encode time =   123.45 ms /     1 runs (  123.45 ms per run)", "whisper.timing",
               {"phase": "encode", "ms": 123.45}),
    ),
)
