"""Figures printed by programs that wrap llama.cpp, ollama or mlx_lm, and speed lines of shapes
the timing blocks do not have:

- normiebench's result JSON (``"pp512": 499.58``, ``"tg128": 46.2`` per model under ``"runs"``);
- obench (an ollama wrapper): its run table (``| 1 | 80.32 tokens/s |``) and its average, in
  markdown or plain (``Average Eval Rate: 5.55 tokens/second``);
- an mlx_lm benchmark wrapper's JSON (``"samples"`` and ``"median"`` prompt_tps/generation_tps);
- llama-simple's (and batched's) ``main: decoded 16 tokens in 0.03 s, speed: 512.33 t/s``, printed
  right after the generated text on the same line (so nothing anchors it at the line's start);
- koboldcpp's ``CtxLimit:`` line with its ``Total:`` rate (both phases over the whole time: a
  figure of its own test, ``total``, never generation).

Every figure is kept as printed and passes analyzer.parsers.plausible. What a wrapper states about
its backend or machine is its own claim, not read here as the host's."""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import regex

from analyzer.parsers import plausible
from analyzer.parsers.base import (
    REJECTED_KEY,
    Event,
    Format,
    Pattern,
    Rejected,
    Sample,
    rx,
    text_field,
    to_float,
    to_int,
)
from analyzer.parsers.timings import _pair

_NUM = r"[-\d.,]+|inf|-?nan"

# A wrapper's JSON document: longer than this many lines or characters, it is not read (a cut or
# hostile file must not be held whole).
MAX_JSON_LINES = 4000
MAX_JSON_CHARS = 1 << 20

_STRINGS = regex.compile(r'"(?:[^"\\]++|\\.)*+"')


def _depth_change(text: str) -> int:
    """Braces and brackets a line opens minus those it closes, outside its JSON strings."""
    bare = _STRINGS.sub("", text)
    return bare.count("{") + bare.count("[") - bare.count("}") - bare.count("]")


def _rate(value: Any, tokens: int | None, ceiling: float, what: str, refused: list[int]) -> float | None:
    """A JSON number as a speed through the one check; anything else is no figure. A speed no machine
    can have is counted in ``refused`` and left out: the document's other figures stand."""
    if type(value) not in (int, float):
        return None
    try:
        return plausible.check(float(value), tokens, ceiling, what)
    except Rejected:
        refused[0] += 1
        return None


def _counted(data: dict, refused: list[int]) -> dict:
    return {**data, REJECTED_KEY: refused[0]} if refused[0] else data


Figure = tuple[str, float, int | None, int | None, str | None]  # test, tok_s, n_prompt, n_gen, config


class _JsonDocument:
    """Collects a pretty-printed JSON object from a line inside it until the object closes, then
    reads it whole with ``json``. ``prefix`` rebuilds what came before the opening line (the keys
    the object opened with are not needed), ``depth`` is how deep that line sits."""

    def __init__(self, prefix: str, depth: int, text: str, read: Callable[[Any], list[dict]]):
        self.parts = [prefix, text]
        self.chars = len(text)
        self.depth = depth + _depth_change(text)
        self.read = read
        self.done = False

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        if self.done:
            return None
        self.parts.append(text)
        self.chars += len(text)
        if len(self.parts) > MAX_JSON_LINES or self.chars > MAX_JSON_CHARS:
            return None  # over budget: given up, the line is dispatched as any other
        self.depth += _depth_change(text)
        if self.depth > 0:
            return []
        self.done = True
        try:
            doc = json.loads("\n".join(self.parts))
        except ValueError:  # a cut or mangled document: nothing read
            return []
        return [Event("wrapper.figures", line_no, "", data) for data in self.read(doc)]

    def finish(self) -> list[Event]:
        return []


def _normiebench(doc: Any) -> list[dict]:
    """Each model's pp/tg figures of a normiebench result (tokensPerSecond repeats tg)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), dict):
        return []
    out = []
    refused = [0]
    for name, run in doc["runs"].items():
        if not isinstance(run, dict):
            continue
        figures: list[Figure] = []
        for key, value in run.items():
            m = regex.fullmatch(r"(pp|tg)(\d{1,7})", key)
            if m is None:
                continue
            n = int(m.group(2))
            prompt = m.group(1) == "pp"
            tok_s = _rate(value, n, plausible.MAX_PROMPT_TOK_S if prompt else plausible.MAX_GEN_TOK_S, key, refused)
            if tok_s is not None:
                figures.append((key, tok_s, n if prompt else 0, 0 if prompt else n, None))
        if figures:
            label = text_field(run, "modelLabel") or text_field({"name": name}, "name")
            model = " ".join(filter(None, (label, text_field(run, "quant"))))
            out.append({"program": "normiebench", "model": model, "figures": figures,
                        "backend_claim": text_field(run, "backend")})
    if out:
        out[0] = _counted(out[0], refused)
    elif refused[0]:
        raise Rejected("no plausible figure in the normiebench result", refused[0])
    return out


def _mlx_benchmark(doc: Any) -> list[dict]:
    """An mlx_lm benchmark wrapper's result: its median (the wrapper's own summary), or its samples
    when the median is cut off. The warmup is not a measurement."""
    if not isinstance(doc, dict):
        return []
    conf = doc.get("configuration")
    conf = conf if isinstance(conf, dict) else {}
    p_n, g_n = conf.get("prompt_tokens"), conf.get("generation_tokens")
    p_n = p_n if type(p_n) is int else None
    g_n = g_n if type(g_n) is int else None

    refused = [0]

    def pair(obj: Any, config: str | None) -> list[Figure]:
        if not isinstance(obj, dict):
            return []
        pn = obj["prompt_tokens"] if type(obj.get("prompt_tokens")) is int else p_n
        gn = obj["generation_tokens"] if type(obj.get("generation_tokens")) is int else g_n
        out: list[Figure] = []
        p = _rate(obj.get("prompt_tps"), pn, plausible.MAX_PROMPT_TOK_S, "prompt rate", refused)
        g = _rate(obj.get("generation_tps"), gn, plausible.MAX_GEN_TOK_S, "generation rate", refused)
        if p is not None:
            out.append(("prompt", p, pn, None, config))
        if g is not None:
            out.append(("generation", g, None, gn, config))
        return out

    figures = pair(doc.get("median"), "aggregate=median")
    if not figures and isinstance(doc.get("samples"), list):
        for i, sample in enumerate(doc["samples"][:1000], 1):
            figures += pair(sample, f"sample={i}")
    model = doc.get("model")
    name = text_field(model, "id") if isinstance(model, dict) else None
    if not figures and refused[0]:
        raise Rejected("no plausible figure in the mlx_lm benchmark result", refused[0])
    return [_counted({"program": "mlx_lm", "model": name, "figures": figures}, refused)] if figures else []


def _decoded(m: regex.Match) -> dict | None:
    n = to_int(m.group("n"))
    tok_s = plausible.check(to_float(m.group("tps")), n, plausible.MAX_GEN_TOK_S, "decoded rate")
    if tok_s is None or math.isnan(tok_s):
        return None
    return {"tok_s": tok_s, "tokens": n}


def _kobold_total(m: regex.Match) -> dict | None:
    data = _pair("p", "g", "koboldcpp")(m) or {"source": "koboldcpp"}
    try:
        total = plausible.check(to_float(m.group("t")), None, plausible.MAX_GEN_TOK_S, "total rate")
    except Rejected:
        total = None
    if total is not None:
        data["total_tok_s"] = total
    return data if len(data) > 1 else None


def _one(phase_rate: str) -> Callable[[regex.Match], dict | None]:
    def build(m: regex.Match) -> dict | None:
        tok_s = plausible.check(to_float(m.group("tps")), None, plausible.MAX_GEN_TOK_S, phase_rate)
        if tok_s is None:
            return None
        out: dict[str, Any] = {"tok_s": tok_s}
        if "run" in m.groupdict():
            out["run"] = int(m.group("run"))
        return out
    return build


WRAPPERS = Format(
    name="wrappers",
    description="figures of wrapper programs (normiebench and mlx_lm benchmark JSON, obench), llama-simple's decoded "
                "speed, koboldcpp's total rate",
    literals=('"nb-', '"mlx_lm"', "Eval Rate", " tokens/s |", "unning benchmark ", "main: decoded ", "T/s), Total:"),
    patterns=(
        # koboldcpp's per-reply line with its Total (its Process and Generate rates as the timing line gives them)
        Pattern("wrapper.kobold_total",
                rx(rf"\bProcess:\s*+(?:{_NUM})s \((?:{_NUM})ms/T = (?P<p>{_NUM})T/s\),\s*+"
                   rf"Generate:\s*+(?:{_NUM})s \((?:{_NUM})ms/T = (?P<g>{_NUM})T/s\),\s*+"
                   rf"Total:\s*+(?:{_NUM})s \((?P<t>{_NUM})T/s\)"), _kobold_total),
        # not anchored: the generated text (no newline at its end) comes before it on the line
        Pattern("wrapper.decoded", rx(rf"main: decoded (?P<n>\d++) tokens in (?:{_NUM}) s, speed: (?P<tps>{_NUM}) t/s"),
                _decoded),
        Pattern("wrapper.obench", rx(r"^[Rr]unning benchmark (?P<count>\d++) times using model: `?+(?P<model>[^\s`]++)"),
                lambda m: {"model": m.group("model")[:200]}),
        Pattern("wrapper.obench", rx(r"^\|\s*+Run\s*+\|\s*+Eval Rate \(Tokens/Second\)\s*+\|\s*+$"), lambda m: {}),
        Pattern("wrapper.obench_run", rx(rf"^\|\s*+(?P<run>\d{{1,6}})\s*+\|\s*+(?P<tps>{_NUM})\s*+tokens/s\s*+\|\s*+$"),
                _one("eval rate")),
        Pattern("wrapper.obench_average",
                rx(rf"^\|?\s*+(?:\*\*)?Average Eval Rate(?:\*\*)?\s*+[|:]\s*+(?P<tps>{_NUM})\s*+tokens/second"),
                _one("average eval rate")),
        Pattern("wrapper.json", rx(r'^\s*+"id"\s*+:\s*+"nb-[^"]*+"\s*+,?\s*+$'),
                collector=lambda d, n, t: _JsonDocument("{", 1, t, _normiebench)),
        Pattern("wrapper.json", rx(r'^\s*+"mlx_lm"\s*+:\s*+"[^"]*+"\s*+,?\s*+$'),
                collector=lambda d, n, t: _JsonDocument('{"runtime": {', 2, t, _mlx_benchmark)),
    ),
    samples=(
        Sample("CtxLimit: 3768/4096, Process:0.44s (442.0ms/T = 2.26T/s), Generate:0.00s (3.0ms/T = 333.33T/s), "
               "Total:0.45s (2.25T/s)", "wrapper.kobold_total",
               {"prompt_tok_s": 2.26, "eval_tok_s": 333.33, "total_tok_s": 2.25, "source": "koboldcpp"}),
        Sample("CtxLimit:1277/8192, Amt:200/200, Init:0.01s, Process:1.55s (1.4ms/T = 697.13T/s), Generate:8.87s "
               "(44.4ms/T = 22.54T/s), Total:10.43s (19.18T/s)", "wrapper.kobold_total",
               {"prompt_tok_s": 697.13, "eval_tok_s": 22.54, "total_tok_s": 19.18}),
        Sample("<s> The capital of France is clock RAM aston offici indentkindmain: decoded 16 tokens in 0.03 s, speed: "
               "512.33 t/s", "wrapper.decoded", {"tok_s": 512.33, "tokens": 16}),
        Sample("main: decoded 32 tokens in 1.20 s, speed: 26.67 t/s", "wrapper.decoded", {"tok_s": 26.67, "tokens": 32}),
        Sample("running benchmark 3 times using model: llama3.2:3b", "wrapper.obench", {"model": "llama3.2:3b"}),
        Sample("Running benchmark 3 times using model: llama3.2:3b", "wrapper.obench", {"model": "llama3.2:3b"}),
        Sample("Running benchmark 3 times using model: `tinyllama:1.1b`", "wrapper.obench", {"model": "tinyllama:1.1b"}),
        Sample("| Run | Eval Rate (Tokens/Second) |", "wrapper.obench", {}),
        Sample("| 1 | 80.32 tokens/s |", "wrapper.obench_run", {"run": 1, "tok_s": 80.32}),
        Sample("|**Average Eval Rate**| 80.20 tokens/second |", "wrapper.obench_average", {"tok_s": 80.2}),
        Sample("Average Eval Rate: 5.55 tokens/second", "wrapper.obench_average", {"tok_s": 5.55}),
        Sample('  "id": "nb-C12596BB-CE3A-4EE9-99D0-5F5",', "wrapper.json", {}),
        Sample('    "mlx_lm": "0.31.3",', "wrapper.json", {}),
    ),
)
