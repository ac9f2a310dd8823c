"""The cost model tested on runs it did not see: speculative sampling's model fitted at one γ, predicting the others.

The model (lesson.formulas): with each draft accepted with probability α, γ drafts commit (1 − α^(γ+1)) / (1 − α)
tokens a step, at a cost of γc + v plain steps. Here α comes from the acceptance measured at the stop's own γ
alone, c from that run's drafting time per draft token and v from this device's latency curve (a pass over γ + 1
tokens against one); the model then predicts A and the decoding speedup A / r at every other γ, and those are run
(interleaved with plain decoding, after a warm-up) and compared. Drawn when the lesson is recorded.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

import numpy as np

from specviz.core import measure
from specviz.core.sampling import Sampling
from specviz.output.lesson.formulas import alpha_from, expected_tokens

GAMMAS = (1, 2, 4, 6)  # the γ values predicted, besides the stop's own
KEYS = ("A_pred", "A_meas", "s_pred", "s_meas")


def _fitted_at(group: Any, curve: Any) -> dict[str, float]:
    """α, c and the verify pass's share of a plain step at the group's own γ, from its runs alone."""
    gamma = int(_cfg(group)["gamma"])
    a = statistics.median(measure.mean_accepted(t) for t in group.runs["sps"])
    c, v = [], []
    for b, m in zip(group.runs["ar"], group.runs["sps"], strict=False):
        steps, plain = [s for s in m.steps if s.forward_tokens > 0], measure.step_s(b)
        c.append(sum(s.propose_s for s in steps) / len(steps) / gamma / plain)
        v.append(sum(s.verify_s + max(0.0, s.wall_s - s.propose_s - s.verify_s) for s in steps) / len(steps) / plain)
    scale = statistics.median(v) / _rel(curve, gamma + 1)  # the verify pass at γ0 against the curve's
    return {"gamma": gamma, "alpha": alpha_from(a, gamma), "c": statistics.median(c), "scale": scale}


def _cfg(group: Any) -> dict[str, Any]:
    cfg = group.configs["sps"]
    return dict(cfg) if isinstance(cfg, dict) else vars(cfg)


def _rel(curve: Any, k: int) -> float:
    return float(np.interp(k, curve.ks, curve.ms) / curve.ms[0])


def test(lm: Any, group: Any, repeats: int = 3) -> dict[str, Any]:
    """The model fitted at the group's γ, and at each other γ its prediction beside the measured runs."""
    from specviz.tuning.compare import interleaved_runs
    from specviz.tuning.probe import cached_curve

    curve = cached_curve(lm)
    f = _fitted_at(group, curve)
    base, cfg = group.runs["ar"][0], group.configs["sps"]
    sampling = Sampling(**base.config["sampling"])
    out: dict[str, Any] = {"fitted_gamma": f["gamma"], "alpha": f["alpha"], "c": round(f["c"], 4), "gammas": []}
    out |= {k: [] for k in KEYS}
    for g in sorted({*GAMMAS, f["gamma"]}):
        if g == f["gamma"]:
            runs = {"ar": group.runs["ar"], "sps": group.runs["sps"]}
        else:
            one = replace(cfg, gamma=g) if not isinstance(cfg, dict) else cfg | {"gamma": g}
            runs = interleaved_runs(lm, base.prompt_ids, {"sps": one}, sampling, repeats=repeats, prompt=base.prompt)
        a_pred = expected_tokens(f["alpha"], g)
        pairs = list(zip(runs["ar"], runs["sps"], strict=False))
        out["gammas"].append(g)
        out["A_pred"].append(round(a_pred, 4))
        out["A_meas"].append(round(statistics.median(measure.mean_accepted(m) for _b, m in pairs), 4))
        out["s_pred"].append(round(a_pred / (g * f["c"] + f["scale"] * _rel(curve, g + 1)), 4))
        out["s_meas"].append(round(statistics.median(measure.mean_accepted(m) / measure.step_cost(b, m)
                                                     for b, m in pairs), 4))  # fmt: skip
    return out


def functions(data: dict[str, Any]) -> dict[str, Any]:
    """gamma_test(what, γ): A_pred, A_meas, s_pred or s_meas at γ; at γ 0, A_err or s_err: the largest relative
    miss over the γ values the model did not see."""

    def read(what: str, g: int) -> float:
        if what in ("A_err", "s_err"):
            k = what[0]
            unseen = [i for i, x in enumerate(data["gammas"]) if x != data["fitted_gamma"]]
            return round(max(abs(data[f"{k}_pred"][i] / data[f"{k}_meas"][i] - 1) for i in unseen), 4)
        if what in ("alpha", "c", "fitted_gamma"):
            return data[what]
        return data[what][data["gammas"].index(int(g))]

    return {"gamma_test": read}


def figure(data: dict[str, Any]) -> Any:
    """A and A / r against γ: the model's lines (fitted at one γ, marked) and the runs measured at each γ."""
    import plotly.graph_objects as go

    from specviz.output.viz.theme import ACCEPT, VERIFY, apply

    fig = go.Figure()
    gs = data["gammas"]
    for key, label, color in (("A", "tokens per pass, A", ACCEPT), ("s", "decoding speedup, A / r", VERIFY)):
        fig.add_scatter(x=gs, y=data[f"{key}_pred"], mode="lines", name=f"{label}: the model",
                        line={"color": color, "width": 3, "dash": "dash"})  # fmt: skip
        fig.add_scatter(x=gs, y=data[f"{key}_meas"], mode="markers", name=f"{label}: measured",
                        marker={"color": color, "size": 14})  # fmt: skip
    fig.add_vline(x=data["fitted_gamma"], line_dash="dot", line_color="#475569")
    fig.add_annotation(x=data["fitted_gamma"], y=1, yref="paper", showarrow=False, xanchor="left", xshift=6,
                       yanchor="top", text=f"fitted here only (α {data['alpha']:.2f}, c {data['c']:.2f})")  # fmt: skip
    fig.add_hline(y=1, line_dash="dot", line_color="#94a3b8")
    fig.update_xaxes(title="drafts per step, γ", dtick=1)
    fig.update_yaxes(title="A, or speedup")
    fig.update_layout(meta={"gamma_test": data})
    return apply(fig, "The cost model fitted at one γ, against runs at the others", height=440)
