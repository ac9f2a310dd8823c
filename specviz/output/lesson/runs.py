"""What a stop's checks read of its group's runs beyond the medians: each number's range over the interleaved runs,
Amdahl's prediction of the speedup, how deep the drafts reached.

A comparison of two methods reads ranges, never medians alone: `low("speedup", "pld") > high("speedup", "eagle")`
holds only where every run of one beat every run of the other; where the ranges overlap the sentence says
"about the same". A range needs MIN_RUNS interleaved runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from specviz.core import measure
from specviz.core.trace import Trace
from specviz.output.lesson.pack import Group

MIN_RUNS = 3  # a range over fewer interleaved runs decides nothing
STATS = ("speedup", "A", "r", "tps", "step_ms")


def values(group: Group, stat: str, name: str) -> list[float]:
    """`stat` of `name` in each interleaved run, paired with plain decoding's run beside it."""
    if stat not in STATS:
        raise ValueError(f"a range is of {', '.join(STATS)}, not {stat!r}")
    runs = group.runs[name]
    pairs = list(zip(group.runs["ar"][: len(runs)], runs, strict=True))
    read: dict[str, Callable[[Any, Any], float]] = {
        "speedup": measure.speedup,
        "A": lambda _b, m: measure.mean_accepted(m),
        "r": measure.step_cost,
        "tps": lambda _b, m: m.tokens_per_s,
        "step_ms": lambda _b, m: 1000 * measure.step_s(m),
    }
    return [read[stat](b, m) for b, m in pairs]


def bound(group: Group, stat: str, name: str, pick: Callable[[list[float]], float]) -> float:
    """The lowest or highest of `stat` over the runs; ValueError below MIN_RUNS runs."""
    found = values(group, stat, name)
    if len(found) < MIN_RUNS:
        raise ValueError(f"{name} has {len(found)} run(s); a range needs {MIN_RUNS} interleaved runs")
    return round(pick(found), 4)


def amdahl(group: Group, name: str) -> float:
    """The speedup A and r predict once the prefill (share s of plain decoding's time, which no method shortens)
    is counted: 1 / (s + (1 − s) r / A), per interleaved pair; the median."""
    out = []
    for b, m in zip(group.runs["ar"], group.runs[name]):
        s = b.prefill_s / measure.generation_s(b)
        out.append(1 / (s + (1 - s) * measure.step_cost(b, m) / measure.mean_accepted(m)))
    return round(statistics.median(out), 4)


def below(group: Group, name: str) -> bool:
    """Whether in most interleaved pairs the end-to-end speedup falls below that pair's A / r, which decoding alone
    would reach: the prefill, which no method shortens, holds it back. Within a pair the speedup is a mediant of
    the prefills' ratio and A / r; medians of A, r and the speedup taken over different runs need not keep the order,
    and one disturbed prefill can reverse one pair."""
    pairs = list(zip(group.runs["ar"], group.runs[name]))
    under = sum(measure.speedup(b, m) < measure.mean_accepted(m) / measure.step_cost(b, m) for b, m in pairs)
    return under > len(pairs) / 2


def closer(trace: Trace) -> float:
    """The share of the run's drafted steps on which the head's guess of the next feature lies closer (cosine) to
    the target's true feature than the last feature does (EAGLE's case for reading the chosen token)."""
    pairs = _cosines(trace)
    return round(sum(pred > prev for pred, prev in pairs) / len(pairs), 4)


def mean_cos(trace: Trace, which: str) -> float:
    """The mean over the run's drafted steps of the cosine to the true next feature: of the head's guess ("pred")
    or of the last feature ("prev")."""
    pairs = _cosines(trace)
    return round(statistics.fmean(p[("pred", "prev").index(which)] for p in pairs), 4)


def _cosines(trace: Trace) -> list[tuple[float, float]]:
    """(cos(guess, true), cos(last, true)) of each step that records the head's features; ValueError for none."""
    feats = [f for s in trace.steps if (f := getattr(s.detail, "features", None))]
    if not feats:
        raise ValueError("the run records no head features")
    return [(f["cos_pred_true"], f["cos_prev_true"]) for f in feats]


def reached(trace: Trace, depth: int) -> int:
    """Steps of the run that accepted at least `depth` drafted tokens (Medusa's head `depth` hit on them)."""
    return sum(s.drafts_accepted >= int(depth) for s in trace.steps)


def p_below(trace: Trace, bar: float) -> float:
    """The share of the run's drafted tokens (a chain's decision records) to which the target gives p below `bar`;
    ValueError for a run that records none."""
    from specviz.output.viz.acceptance import records

    ps = [r["p"] for s in trace.steps for r in records(s)]
    if not ps:
        raise ValueError("the run records no drafted token's p")
    return round(sum(p < float(bar) for p in ps) / len(ps), 4)


def step_ms(group: Group, name: str) -> float:
    """The median over the runs of one step's mean wall time, in milliseconds."""
    return round(1000 * statistics.median(measure.step_s(t) for t in group.runs[name]), 2)


def sps_fit(group: Group, config: dict[str, Any]) -> dict[str, float]:
    """Speculative sampling's runs as the cost model reads them: γ, α fitted to the measured A at that γ, c (one
    draft token's propose time) and v (the verify pass), each against a plain step, the model's speedup with
    them, and the measured one."""
    from specviz.output.lesson.formulas import alpha_from, model_speedup

    gamma = int(config["gamma"])
    c, v = [], []
    for b, m in zip(group.runs["ar"], group.runs["sps"]):
        steps, plain = [s for s in m.steps if s.forward_tokens > 0], measure.step_s(b)
        c.append(sum(s.propose_s for s in steps) / len(steps) / max(gamma, 1) / plain)
        v.append(sum(s.verify_s for s in steps) / len(steps) / plain)
    alpha = alpha_from(statistics.median(values(group, "A", "sps")), gamma)
    cm, vm = statistics.median(c), statistics.median(v)
    return {
        "gamma": gamma,
        "alpha": alpha,
        "c": round(cm, 4),
        "v": round(vm, 4),
        "model": round(model_speedup(alpha, cm, gamma, vm), 4),
        "speedup": round(statistics.median(values(group, "speedup", "sps")), 4),
    }
