"""Tuning sweeps: settings of one method timed against plain decoding, interleaved, as plain data.

The Lookahead and EAGLE defaults come from these sweeps (models/lookahead_sweep.json and
models/eagle/live_sweep.json, written by `write_lookahead` and `write_eagle`); the pages draw them.
Timings on a shared machine drift, so every
setting runs right after a plain run on the same prompt, and only ratios are kept: per prompt the
median plain generation time (measure.generation_s) over the median setting's, then the median over
prompts. Every file carries a provenance record (measure.Provenance) of where and when it was measured.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from specviz.core.measure import generation_s, pooled_accepted, provenance
from specviz.core.model import LoadedModel, load_model
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from specviz.corpus.sharegpt import training_prompts
from specviz.methods import ar, eagle, lookahead

MODELS = Path(__file__).resolve().parents[2] / "models"
LOOKAHEAD_PATH = MODELS / "lookahead_sweep.json"
LOOKAHEAD_COMMAND = (
    "python -c 'from specviz.tuning.sweep import write_lookahead; write_lookahead()'"
    "  # about 6 min on an idle 2-core machine"
)
EAGLE_PATH = MODELS / "eagle" / "live_sweep.json"
EAGLE_COMMAND = "python -m specviz calibrate eagle --live  # about 5 min on an idle 2-core machine"
EAGLE_SHAPES = ((1, 4, 4), (2, 2, 4), (2, 4, 6), (2, 4, 8), (3, 4, 6), (3, 4, 8), (4, 4, 10), (5, 6, 16), (6, 6, 20))

Generate = Callable[[LoadedModel, list[int], Sampling, Any], Trace]


@dataclass
class Measured:
    """One setting's result: speedup over plain decoding, A, and its first-repeat traces."""

    speedup: float
    A: float
    identical: int  # prompts whose greedy output equals plain decoding's (first repeat)
    traces: list[Trace] = field(default_factory=list)


def _one_prompt(
    lm: LoadedModel,
    ids: list[int],
    s: Sampling,
    configs: list[Any],
    generate: Generate,
    progress: Callable[[str], None],
    describe: Callable[[Any], str],
) -> list[tuple[float, Trace]]:
    """Plain decoding, then every config, on one prompt: (generation seconds, trace) for each, plain first."""
    plain = ar.generate(lm, ids, s)
    runs = [(generation_s(plain), plain)]
    for cfg in configs:
        trace = generate(lm, ids, s, cfg)
        runs.append((generation_s(trace), trace))
        progress(f"  {describe(cfg)}: A={trace.mean_accepted:.2f}, {runs[0][0] / runs[-1][0]:.2f}x")
    return runs


def _summarise(secs: list[list[list[float]]], traces: list[list[Trace]]) -> list[Measured]:
    """Per config: the median over prompts of plain / config median seconds, pooled A, outputs equal to plain's."""
    med = [[statistics.median(x) for x in row] for row in secs]
    out = []
    for i in range(1, len(secs)):
        runs = traces[i]
        out.append(
            Measured(
                speedup=round(statistics.median(a / b for a, b in zip(med[0], med[i], strict=True)), 4),
                A=round(pooled_accepted(runs), 4),
                identical=sum(t.output_ids == w.output_ids for t, w in zip(runs, traces[0], strict=True)),
                traces=runs,
            )
        )
    return out


def interleaved(
    lm: LoadedModel,
    prompts: list[str],
    configs: list[Any],
    generate: Generate,
    max_new_tokens: int = 48,
    repeats: int = 1,
    progress: Callable[[str], None] = print,
    describe: Callable[[Any], str] = str,
) -> tuple[list[Measured], list[Trace]]:
    """Time every config against plain decoding on every prompt; return per-config results and the plain traces."""
    s = Sampling(max_new_tokens=max_new_tokens)
    encoded = [lm.encode_prompt(p) for p in prompts]
    # secs[setting][prompt]: generation seconds of every repeat, setting 0 = plain decoding
    secs: list[list[list[float]]] = [[[] for _ in encoded] for _ in range(len(configs) + 1)]
    traces: list[list[Trace]] = [[] for _ in range(len(configs) + 1)]  # the first repeat's
    for rep in range(repeats):
        for p, ids in enumerate(encoded):
            progress(f"repeat {rep + 1}/{repeats}, prompt {p + 1}/{len(encoded)}")
            for i, (sec, trace) in enumerate(_one_prompt(lm, ids, s, configs, generate, progress, describe)):
                secs[i][p].append(sec)
                if rep == 0:
                    traces[i].append(trace)
    return _summarise(secs, traces), traces[0]


def header(
    lm: LoadedModel, command: str, function: str, max_new_tokens: int, repeats: int, prompts: list[str]
) -> dict[str, Any]:
    """What every sweep file records about how and where it was measured (a measure.Provenance among it)."""
    return {
        "command": command,
        "function": function,
        "device": lm.describe(),
        "provenance": provenance(lm.describe()).to_dict(),
        "threads": torch.get_num_threads(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "max_new_tokens": max_new_tokens,
        "repeats": repeats,
        "prompts": prompts,
    }


def stored(path: Path | str) -> dict[str, Any] | None:
    """A sweep as written (write_lookahead, write_eagle, `calibrate medusa`), for a page to draw; None when none is
    stored; ValueError with the reason when the file cannot be read as one."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(data, dict):
        raise ValueError("it holds no sweep record")
    return data


def _median(xs: list[float]) -> float:
    """The median rounded to 0.01, 0 for no values."""
    return round(statistics.median(xs), 2) if xs else 0.0


def _unseen_prompts(n: int) -> list[str]:
    """The last n of 8000 shuffled ShareGPT first turns: far beyond any prompt the heads were distilled on."""
    return training_prompts(8000)[-n:]


def _measured_unseen(measure: Callable[..., dict], n_prompts: int, **kw: Any) -> dict:
    """A sweep measured by the built-in model in fp32 on n unseen ShareGPT prompts, saying where they came from."""
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    out = measure(lm, _unseen_prompts(n_prompts), **kw)
    out["source"] = f"the last {n_prompts} of 8000 shuffled ShareGPT first turns (never used in training)"
    return out


def _with_rows(top: dict[str, Any], rows: list[dict[str, Any]], chosen: dict[str, Any]) -> dict[str, Any]:
    """A sweep record: its header, its rows, the fastest of them and the setting the method's Config chose."""
    return {**top, "rows": rows, "best": max(rows, key=lambda r: r["speedup"]), "chosen": chosen}


def _wng_label(c: lookahead.Config) -> str:
    """A lookahead setting as W=… N=… G=…"""
    return f"W={c.window} N={c.ngram} G={c.guesses}"


def _eagle_label(c: eagle.Config) -> str:
    """An EAGLE tree shape as depth/top_k/total_tokens."""
    return f"{c.depth}/{c.top_k}/{c.total_tokens}"


def _row(setting: dict[str, Any], m: Measured, prompts: int, **phases: float) -> dict[str, Any]:
    """One setting's row of a sweep file: the setting, its speedup and A (and phase timings), identity, prompts."""
    return {**setting, "speedup": m.speedup, "A": m.A, **phases, "identical": m.identical, "prompts": prompts}


def _lookahead_row(c: lookahead.Config, m: Measured, prompts: int) -> dict[str, Any]:
    """One lookahead setting's row of the sweep file."""
    setting = {"window": c.window, "ngram": c.ngram, "guesses": c.guesses, "forward_tokens": c.forward_tokens}
    return _row(setting, m, prompts)


def measure_lookahead(
    lm: LoadedModel,
    prompts: list[str],
    windows: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
    shapes: tuple[tuple[int, int], ...] = ((2, 2), (2, 3), (3, 2)),
    max_new_tokens: int = 48,
    repeats: int = 1,
    progress: Callable[[str], None] = print,
) -> dict:
    """Greedy speedup over `ar` and A for every lookahead W × (N, G), each setting interleaved with ar."""
    cfgs = [lookahead.Config(window=w, ngram=n, guesses=g) for n, g in shapes for w in windows]
    measured, _ = interleaved(lm, prompts, cfgs, lookahead.generate, max_new_tokens, repeats, progress, _wng_label)
    rows = [_lookahead_row(c, m, len(prompts)) for c, m in zip(cfgs, measured, strict=True)]
    d = lookahead.Config()
    head = header(lm, LOOKAHEAD_COMMAND, "specviz.tuning.sweep.measure_lookahead", max_new_tokens, repeats, prompts)
    return _with_rows(head, rows, {"window": d.window, "ngram": d.ngram, "guesses": d.guesses})


def write_lookahead(path: Path | str = LOOKAHEAD_PATH, n_prompts: int = 7, **kw: Any) -> dict:
    """Re-measure the lookahead sweep on unseen ShareGPT prompts (never the Spec-Bench questions) and write it."""
    out = _measured_unseen(measure_lookahead, n_prompts, **kw)
    out["call"] = {
        "n_prompts": n_prompts,
        "threads": torch.get_num_threads(),
        **{k: v for k, v in kw.items() if k != "progress"},
    }
    Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def _per_step_ms(m: Measured, key: str) -> float:
    """Median over the drafting steps of the first repeat of one phase's seconds (`propose_s`, `verify_s`), in ms."""
    return _median([1000 * getattr(x, key) for t in m.traces for x in t.steps if x.forward_tokens > 1])


def _eagle_row(c: eagle.Config, m: Measured, prompts: int) -> dict[str, Any]:
    """One EAGLE tree shape's row of the sweep file, with its draft and verify ms per drafting step."""
    setting = {"depth": c.depth, "top_k": c.top_k, "total_tokens": c.total_tokens}
    ms = {"draft_ms": _per_step_ms(m, "propose_s"), "verify_ms": _per_step_ms(m, "verify_s")}
    return _row(setting, m, prompts, **ms)


def measure_eagle(
    lm: LoadedModel,
    prompts: list[str],
    shapes: tuple[tuple[int, int, int], ...] = EAGLE_SHAPES,
    max_new_tokens: int = 48,
    repeats: int = 2,
    head: str = "",
    progress: Callable[[str], None] = print,
) -> dict:
    """Greedy speedup over `ar`, A, and draft / verify ms per step for each EAGLE depth/top_k/total_tokens."""
    cfgs = [eagle.Config(depth=d, top_k=k, total_tokens=n, head=head) for d, k, n in shapes]
    measured, plain = interleaved(lm, prompts, cfgs, eagle.generate, max_new_tokens, repeats, progress, _eagle_label)
    rows = [_eagle_row(c, m, len(prompts)) for c, m in zip(cfgs, measured, strict=True)]
    d = eagle.Config()
    top = header(lm, EAGLE_COMMAND, "specviz.tuning.sweep.measure_eagle", max_new_tokens, repeats, prompts)
    top["ar_ms_per_token"] = _median([1000 * t.s_per_token for t in plain])
    return _with_rows(top, rows, {"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens})


def write_eagle(
    path: Path | str = EAGLE_PATH, n_prompts: int = 8, progress: Callable[[str], None] = print, **kw: Any
) -> dict:
    """Re-measure the EAGLE sweep on unseen ShareGPT prompts (never the Spec-Bench questions) and write it."""
    out = _measured_unseen(measure_eagle, n_prompts, progress=progress, **kw)
    out["note"] = (
        f"Measured on {n_prompts} unseen ShareGPT prompts × {out['max_new_tokens']} tokens at T = 0 "
        f"on {out['device']}; each shape interleaved with plain decoding, {out['repeats']} repeats, "
        "median ratios. Draft and verify are medians per drafting step."
    )
    Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out
