"""Why a method wins or loses on this device: its step split into drafting, verifying and the rest against plain
decoding's step, and its predicted speedup against the size of the tree it verifies (the fit's curve, with the
fitted size, the paper's size and the measured run marked)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.core import measure
from specviz.core.trace import Trace
from specviz.output.viz.theme import DRAFT, JUDGE, NEUTRAL, VERIFY, apply, method_color

PARTS = (("draft", "drafting", DRAFT), ("verify", "the target's pass", VERIFY), ("other", "the rest", JUDGE))
SHOWN = ("eagle", "eagle3", "medusa")  # the curves the size figure draws (Hydra's and the hybrid's overlap them)


def split(trace: Trace) -> dict[str, float]:
    """A run's mean step in ms: drafting (propose), the target's verifying pass, and the rest (acceptance, commit,
    bookkeeping); a plain-decoding run's whole step is its pass."""
    steps = [s for s in trace.steps if s.forward_tokens > 0] or list(trace.steps)
    n = max(1, len(steps))
    wall = 1000 * sum(s.wall_s for s in steps) / n
    draft = 1000 * sum(s.propose_s for s in steps) / n
    verify = 1000 * sum(s.verify_s for s in steps) / n if any(s.verify_s for s in steps) else wall - draft
    return {"draft": draft, "verify": verify, "other": max(0.0, wall - draft - verify), "step": wall}


def splits(traces: Mapping[str, Sequence[Trace] | Trace]) -> dict[str, dict[str, float]]:
    """Each method's median step split over its runs (a run, or a list of interleaved runs)."""
    out = {}
    for name, runs in traces.items():
        each = [split(t) for t in ([runs] if isinstance(runs, Trace) else runs)]
        out[name] = {k: statistics.median(e[k] for e in each) for k in each[0]}
    return out


def split_figure(traces: Mapping[str, Any], labels: Mapping[str, str] | None = None, slide: bool = False):
    """One bar per method: its mean step in ms split into drafting, the target's pass and the rest, beside plain
    decoding's step (grey, and the dotted line); each bar says its r, its tokens a step (A) and what a token then
    costs against plain decoding's."""
    found = splits(traces)
    if "ar" not in found:
        raise KeyError("plain decoding's run, which every step is measured against")
    plain = found["ar"]["step"]
    names = [n for n in found if n != "ar"]
    label = {n: (labels or {}).get(n, n) for n in ["ar", *names]}
    fig = go.Figure()
    fig.add_bar(y=[label["ar"]], x=[plain], name="plain decoding's step", orientation="h", marker_color=NEUTRAL,
                hovertemplate="%{y}: %{x:.1f} ms a step<extra></extra>")  # fmt: skip
    for key, text, color in PARTS:
        fig.add_bar(
            y=[label[n] for n in names], x=[found[n][key] for n in names], name=text, orientation="h",
            marker_color=color, hovertemplate="%{y}: " + text + " %{x:.1f} ms<extra></extra>",
        )  # fmt: skip
    fig.add_vline(x=plain, line_dash="dot", line_color="#475569")
    said = []
    for n in ["ar", *names]:
        one = [traces[n]] if isinstance(traces[n], Trace) else list(traces[n])
        a = statistics.median(measure.mean_accepted(t) for t in one) if n != "ar" else 1.0
        r = found[n]["step"] / plain
        said.append(f"  r {r:.2f}, A {a:.2f}: a token costs {r / a:.2f} of plain decoding's")
    fig.add_scatter(
        x=[found[n]["step"] for n in ["ar", *names]], y=[label[n] for n in ["ar", *names]], text=said,
        mode="text", textposition="middle right", showlegend=False, hoverinfo="skip",
    )  # fmt: skip
    top = max(v["step"] for v in found.values())
    fig.update_xaxes(title="mean step (ms); the dotted line: plain decoding's step", range=[0, top * 2.0])
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="stack", meta={"split": found})
    return apply(fig, "Where a step's time goes, against plain decoding's", slide=slide, height=420)


MARKS = (("fitted", "circle", 16), ("paper", "diamond-open", 16), ("measured", "x", 14))
MARKED = {"fitted": "the fitted size", "paper": "the paper's size", "measured": "measured here (A / r)"}


def size_figure(curves: Mapping[str, Mapping[str, Any]], knee: float | None, slide: bool = False) -> go.Figure:
    """Each method's predicted speedup (A / r, the fit's model of this device) against the tokens its tree sends
    through the target, with its fitted size, the paper's size and the measured run marked, and where a pass
    starts to cost twice one token's."""
    fig = go.Figure()
    for name, c in curves.items():
        color = method_color(name)
        xs, ys = zip(*c["widths"], strict=True) if c["widths"] else ((), ())
        fig.add_scatter(x=xs, y=ys, mode="lines", name=c.get("label", name), line={"color": color, "width": 3})
        for key, symbol, size in MARKS:
            if c.get(key):
                fig.add_scatter(
                    x=[c[key][0]], y=[c[key][1]], mode="markers", showlegend=False,
                    name=f"{c.get('label', name)}: {MARKED[key]}",
                    marker={"symbol": symbol, "size": size, "color": "#111827" if key == "measured" else color,
                            "line": {"width": 2, "color": color}},
                )  # fmt: skip
    for key, symbol, size in MARKS:  # one legend entry per mark, in grey: the colour is the method's
        fig.add_scatter(x=[None], y=[None], mode="markers", name=MARKED[key],
                        marker={"symbol": symbol, "size": size, "color": "#475569"})  # fmt: skip
    if knee:
        fig.add_vline(x=knee, line_dash="dot", line_color="#475569")
        fig.add_annotation(x=math.log10(knee), y=1, yref="paper", text=f"a pass costs 2× one token's at {knee:.0f}",
                           showarrow=False, xanchor="left", xshift=6, yanchor="top")  # fmt: skip
    fig.add_hline(y=1, line_dash="dot", line_color=NEUTRAL)
    ticks = [2, 4, 8, 16, 32, 64]
    fig.update_xaxes(title="tokens the target verifies in one pass (tree size)", type="log", tickvals=ticks)
    fig.update_yaxes(title="speedup over plain decoding")
    fig.update_layout(meta={"curves": {k: dict(v) for k, v in curves.items()}, "knee": knee})
    return apply(fig, "Tree size against speedup on this device", slide=slide, height=460)


def curves(data: Mapping[str, Any], numbers: Mapping[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """The size figure's curves from a fit's summary (tuning.fit.summary) for the methods shown: (width, predicted
    speedup) per width, the fitted and the paper's point, and the measured A / r (`numbers`: name -> (the width it
    ran, its measured A / r))."""
    from specviz import methods

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


def live_size(traces: Mapping[str, Trace]) -> go.Figure:
    """The size figure for runs just made: the fit stored for their device (python -m specviz fit measures it)
    and each shown method's A / r beside plain decoding's run."""
    from specviz.tuning import fit_summary

    cost = fit_summary.stored_cost(traces["ar"].device)
    if cost is None:
        raise KeyError(f"no fit is stored for {traces['ar'].device}: python -m specviz fit measures it")
    plain = traces["ar"]
    numbers = {n: (max(s.forward_tokens for s in t.steps), measure.mean_accepted(t) / measure.step_cost(plain, t))
               for n, t in traces.items() if n in SHOWN}  # fmt: skip
    data = fit_summary.summary(cost)
    return size_figure(curves(data, numbers), data["knee"])
