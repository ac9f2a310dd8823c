"""Speculative sampling's cost model fitted at one γ and drawn against γ: A and the decoding speedup A / r, the
model's lines beside the runs measured at each γ.

The model: γ drafts each accepted with probability α commit (1 − α^(γ+1)) / (1 − α) tokens a step, at γc + v
plain steps. `fit_at` reads α from the acceptance measured at the runs' own γ, c from their drafting time per
draft token and v (the target's pass and the rest of the step) from their step; `predict` carries v to other γ
by the device's latency curve when one is given (the pass over γ + 1 tokens against the one measured), else holds
it. The lesson's recording runs the other γ too (output/lesson/gamma.py); the page draws the fit of the run it
made, its lines and its one measured point.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from specviz.core import measure
from specviz.core.draft_length import alpha_from, expected_tokens
from specviz.core.trace import Trace
from specviz.output.viz.theme import ACCEPT, NEUTRAL, VERIFY, apply

GAMMAS = (1, 2, 3, 4, 6)  # the γ values the model is drawn at
KEYS = ("A_pred", "A_meas", "s_pred", "s_meas")


def fit_at(pairs: Sequence[tuple[Trace, Trace]], gamma: int) -> dict[str, float]:
    """α, c and v from interleaved (plain decoding, speculative sampling) runs at `gamma`."""
    a = statistics.median(measure.mean_accepted(m) for _b, m in pairs)
    c, v = [], []
    for b, m in pairs:
        steps, plain = [s for s in m.steps if s.forward_tokens > 0], measure.step_s(b)
        c.append(sum(s.propose_s for s in steps) / len(steps) / gamma / plain)
        v.append(sum(s.wall_s - s.propose_s for s in steps) / len(steps) / plain)
    return {"gamma": gamma, "alpha": alpha_from(a, gamma), "c": statistics.median(c), "v": statistics.median(v)}


def predict(f: dict[str, float], g: int, curve: tuple[Sequence[float], Sequence[float]] | None = None) -> dict:
    """The model's A and A / r at `g`; v carried from the fitted γ by the latency curve (ks, ms) when given."""
    v = f["v"]
    if curve is not None:
        ks, ms = curve
        v *= float(np.interp(g + 1, ks, ms) / np.interp(f["gamma"] + 1, ks, ms))
    a = expected_tokens(f["alpha"], g)
    return {"A_pred": round(a, 4), "s_pred": round(a / (g * f["c"] + v), 4)}


def measured(pairs: Sequence[tuple[Trace, Trace]]) -> dict[str, float]:
    """A and A / r of interleaved runs at one γ (medians)."""
    return {
        "A_meas": round(statistics.median(measure.mean_accepted(m) for _b, m in pairs), 4),
        "s_meas": round(statistics.median(measure.mean_accepted(m) / measure.step_cost(b, m) for b, m in pairs), 4),
    }


def table(f: dict[str, float], runs: Mapping[int, Sequence[tuple[Trace, Trace]]], curve: Any = None) -> dict[str, Any]:
    """The figure's data: the fit, and at each γ the model's A and A / r beside the runs measured there (None where
    none were made)."""
    gammas = sorted({*GAMMAS, *runs})
    out: dict[str, Any] = {"fitted_gamma": f["gamma"], "alpha": f["alpha"], "c": round(f["c"], 4), "gammas": gammas}
    out |= {k: [] for k in KEYS}
    for g in gammas:
        row = predict(f, g, curve) | (measured(runs[g]) if g in runs else {"A_meas": None, "s_meas": None})
        for k in KEYS:
            out[k].append(row[k])
    return out


def figure(data: dict[str, Any], slide: bool = False) -> go.Figure:
    """A and A / r against γ: the model's lines (fitted at one γ, marked) and the runs measured at each γ."""
    fig = go.Figure()
    gs = data["gammas"]
    for key, label, color in (("A", "tokens per pass, A", ACCEPT), ("s", "decoding speedup, A / r", VERIFY)):
        fig.add_scatter(x=gs, y=data[f"{key}_pred"], mode="lines", name=f"{label}: the model",
                        line={"color": color, "width": 3, "dash": "dash"})  # fmt: skip
        shown = [(g, y) for g, y in zip(gs, data[f"{key}_meas"], strict=True) if y is not None]
        fig.add_scatter(x=[g for g, _ in shown], y=[y for _, y in shown], mode="markers", name=f"{label}: measured",
                        marker={"color": color, "size": 14})  # fmt: skip
    fig.add_vline(x=data["fitted_gamma"], line_dash="dot", line_color="#475569")
    fig.add_annotation(x=data["fitted_gamma"], y=1, yref="paper", showarrow=False, xanchor="left", xshift=6,
                       yanchor="top", text=f"fitted here only (α {data['alpha']:.2f}, c {data['c']:.2f})")  # fmt: skip
    fig.add_hline(y=1, line_dash="dot", line_color=NEUTRAL)
    fig.update_xaxes(title="drafts per step, γ", dtick=1)
    fig.update_yaxes(title="A, or speedup")
    fig.update_layout(meta={"gamma_test": data})
    return apply(fig, "The cost model fitted at one γ, against runs at the others", slide=slide, height=440)


def live(traces: dict[str, Trace]) -> go.Figure:
    """The page's run: the model fitted at its γ and drawn at every γ, with its one measured point (the lesson's
    recording runs the other γ beside it)."""
    pair = (traces["ar"], traces["sps"])
    gamma = int(traces["sps"].config["method"]["gamma"])
    return figure(table(fit_at([pair], gamma), {gamma: [pair]}))
