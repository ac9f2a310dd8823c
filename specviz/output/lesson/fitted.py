"""The fit a recording ran at, kept with it: each tree and window method's fitted shape on the recording's device,
its predicted A, r and speedup, the paper's shape priced there, the best shape per verified width (the curve of
speedup against tree size) and where that device's forward starts to cost twice one token's.

A recording stores it (`summary`), so a pack says what "fitted" meant where it was made, and its checks can hold
a method's runs to it (`functions`: `fitted(m)` fails a recording whose trees are not the fitted ones).
"""

from __future__ import annotations

from typing import Any

from specviz.core.trace import Trace

SHOWN = ("eagle", "eagle3", "medusa")  # the curves the size figure draws (viz.why.SHOWN)
WIDER = {"hybrid": 1}  # a method whose graft may verify a token more than its tree's


def summary(lm: Any) -> dict[str, Any]:
    """What the fit chose on `lm`'s device, as plain data a pack holds (tuning.fit.summary)."""
    from specviz.tuning import fit, fit_summary

    return fit_summary.summary(fit.device_cost(lm))


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
