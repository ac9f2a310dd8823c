"""The fit a recording ran at, kept with it: each tree and window method's fitted shape on the recording's device,
its predicted A, r and speedup, the paper's shape priced there, the best shape per verified width (the curve of
speedup against tree size) and where that device's forward starts to cost twice one token's.

A recording stores it (`summary`), so a pack says what "fitted" meant where it was made, and its checks can hold
a method's runs to it (`functions`: `fitted(m)` fails a recording whose trees are not the fitted ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specviz import methods
from specviz.core.trace import Trace

SHOWN = ("eagle", "eagle3", "medusa")  # the curves the size figure draws (Hydra's and the hybrid's overlap them)
WIDER = {"hybrid": 1}  # a method whose graft may verify a token more than its tree's


def knee(ks: list[float], ms: list[float], times: float = 2.0) -> float | None:
    """The fewest new tokens at which a forward costs `times` one token's (interpolated), None within the curve."""
    rel = [m / ms[0] for m in ms]
    for i in range(1, len(ks)):
        if rel[i] >= times:
            return round(float(np.interp(times, rel[i - 1 : i + 1], ks[i - 1 : i + 1])), 1)
    return None


def summary(lm: Any) -> dict[str, Any]:
    """What the fit chose on `lm`'s device, as plain data a pack holds."""
    from specviz.tuning import fit

    cost = fit.device_cost(lm)

    def priced(c: Any) -> dict[str, Any]:
        return {"forward_tokens": c.forward_tokens, "A": round(c.A, 4), "r": round(c.r, 4),
                "speedup": round(c.speedup, 4)}  # fmt: skip

    out = {}
    for name, f in fit.fits(lm).items():
        widths = [[c.forward_tokens, round(c.A, 4), round(c.r, 4), round(c.speedup, 4)] for c in f.by_width]
        out[name] = priced(f.best) | {"fields": dict(f.best.fields), "widths": widths}
        out[name] |= {"paper": priced(f.paper)} if f.paper else {}
    return {
        "device": cost.device, "ks": list(cost.ks), "ms": [round(m, 4) for m in cost.ms],
        "plain_ms": round(cost.plain_ms, 4), "knee": knee(list(cost.ks), list(cost.ms)), "methods": out,
    }  # fmt: skip


def width(trace: Trace) -> int:
    """The most tokens one step of the run sent through the target."""
    return max((s.forward_tokens for s in trace.steps), default=0)


def ran_fitted(data: dict[str, Any], name: str, config: Any, runs: list[Trace]) -> bool:
    """Whether `name` ran at the recording's fitted shape: its Config's shape fields are the fit's, and no step
    verified more tokens than that shape holds."""
    f = data.get("methods", {}).get(name)
    if f is None:
        raise KeyError(f"the recording's fit holds no {name!r}")
    cfg = dict(config) if isinstance(config, dict) else vars(config)
    same = all(cfg.get(k) == v for k, v in f["fields"].items())
    most = f["forward_tokens"] + WIDER.get(name, 0)
    if isinstance(cfg.get("copy_length"), int):  # the hybrid's copy steps verify the pool's chain alone
        most = max(most, cfg["copy_length"] + 1)
    return same and max(width(t) for t in runs) <= most


def curves(data: dict[str, Any], numbers: dict[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """The size figure's curves (viz.why.size_figure) for the methods shown: (width, predicted speedup) per
    width, the fitted and the paper's point, and the measured A / r at the fitted width (`numbers`: name -> (the
    width it ran, its measured A / r))."""
    out = {}
    for name in SHOWN:
        f = data.get("methods", {}).get(name)
        if f is None:
            continue
        paper = f.get("paper")
        out[name] = {
            "label": methods.card(name).label,
            "widths": [[w[0], w[3]] for w in f["widths"]],
            "fitted": [f["forward_tokens"], f["speedup"]],
            "paper": [paper["forward_tokens"], paper["speedup"]] if paper else None,
            "measured": list(numbers[name]) if name in numbers else None,
        }
    return out


def measured_points(group: Any) -> dict[str, tuple[float, float]]:
    """Each shown method's (width it ran, median A / r over its interleaved runs) in a recording's group."""
    out = {}
    for name in SHOWN:
        if name in group.runs:
            n = group.numbers(name)
            out[name] = (width(group.median(name)), round(n["A"].median / n["r"].median, 4))
    return out


def functions(data: dict[str, Any]) -> dict[str, Any]:
    """What a check or a narration reads of the recording's fit: fit(m, what) (size, A, r, speedup, paper_size,
    paper_speedup) and fit_knee()."""

    def read(name: str, what: str) -> float:
        f = data["methods"][name]
        if what.startswith("paper_"):
            return f["paper"]["forward_tokens" if what == "paper_size" else what[6:]]
        return f["forward_tokens"] if what == "size" else f[what]

    def fit_knee() -> float:
        if data.get("knee") is None:
            raise ValueError("the recording's curve never reaches twice one token's cost")
        return data["knee"]

    return {"fit": read, "fit_knee": fit_knee}
