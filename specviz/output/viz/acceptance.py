"""Acceptance decisions: per-token p, q, ratio and draw; the rejection's distributions; typical regions; the lab."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.core.details import ChainDetail
from specviz.core.trace import StepTrace, Trace
from specviz.output.viz.theme import ACCEPT, DRAFT, NEUTRAL, REJECT, VERIFY, apply, tint, token_text

RULE_COLORS = {"speculative": ACCEPT, "typical": DRAFT, "flawed": REJECT}


def _label(text: str) -> str:
    """A token's text made visible on an axis (spaces and newlines shown)."""
    return token_text(text)


def records(step: StepTrace) -> list[dict[str, Any]]:
    """A chain step's decision records (sps, pld); none for a step that drafted nothing."""
    return step.detail.records if isinstance(step.detail, ChainDetail) else []


def decisions_figure(step: StepTrace, title: str | None = None) -> go.Figure:
    """Every proposed token of one step: p(x), q(x), the acceptance chance min(1, p/q) and the draw u."""
    recs = records(step)
    x = [f"{r['pos'] + 1}: {_label(r.get('text', str(r['token'])))}" for r in recs]
    colors = [ACCEPT if r["accepted"] else REJECT for r in recs]
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["p"] for r in recs], name="target p(x)", marker_color=VERIFY)
    fig.add_bar(x=x, y=[r["q"] for r in recs], name="draft q(x)", marker_color=DRAFT)
    fig.add_scatter(
        x=x,
        y=[min(1.0, r["ratio"]) for r in recs],
        mode="markers",
        name="min(1, p/q)",
        marker={"symbol": "line-ew-open", "size": 34, "line": {"width": 4}, "color": "#111827"},
    )
    if any(r.get("u") is not None for r in recs):
        fig.add_scatter(
            x=x,
            y=[r.get("u") for r in recs],
            mode="markers",
            name="draw u",
            marker={"symbol": "x", "size": 13, "color": colors},
        )
    for xi, r, c in zip(x, recs, colors, strict=True):
        fig.add_annotation(
            x=xi, y=1.08, text="accept" if r["accepted"] else "reject", showarrow=False, font={"color": c}
        )
    fig.update_layout(
        barmode="group", yaxis={"range": [0, 1.15], "title": "probability"}, xaxis={"title": "proposed token"}
    )
    return apply(fig, title or f"Step {step.index}: the decision for every proposed token", height=380)


def rejection_figure(dists: dict[str, Any], title: str | None = None) -> go.Figure:
    """p, q and the resampling distribution norm((p − q)+) over the top tokens at a rejection."""
    x = [_label(t) for t in dists.get("texts", [str(t) for t in dists["tokens"]])]
    fig = go.Figure()
    fig.add_bar(x=x, y=dists["p"], name="target p", marker_color=VERIFY)
    fig.add_bar(x=x, y=dists["q"], name="draft q", marker_color=DRAFT)
    fig.add_bar(x=x, y=dists["residual"], name="resample from: norm((p − q)+)", marker_color=ACCEPT)
    fig.update_layout(barmode="group", yaxis={"title": "probability"}, xaxis={"title": "token"})
    return apply(fig, title or "At the rejection: where the next token is drawn from", height=360)


def typical_points(trace: Trace) -> list[dict[str, Any]]:
    """(entropy of p, p(x), text) of every proposed token in a trace, for the typical-acceptance chart."""
    return [
        {"entropy": r["entropy"], "p": r["p"], "text": r.get("text", ""), "step": s.index}
        for s in trace.steps
        for r in records(s)
        if "entropy" in r
    ]


def typical_figure(points: list[dict[str, Any]], eps: float, delta: float, title: str | None = None) -> go.Figure:
    """p(x) against the threshold min(ε, δ·e^(−H)) over the entropy H; above the curve is accepted."""
    h_max = max([6.0, *(pt["entropy"] + 0.5 for pt in points)])
    hs = [h_max * i / 200 for i in range(201)]
    thr = [min(eps, delta * math.exp(-h)) for h in hs]
    floor = min([1e-4, *(max(pt["p"], 1e-9) / 2 for pt in points)])
    fig = go.Figure()
    _add_regions(fig, hs, thr, floor, f"threshold min({eps:g}, {delta:g}·e^(−H))")
    if points:
        ok = [pt["p"] > min(eps, delta * math.exp(-pt["entropy"])) for pt in points]
        fig.add_scatter(
            x=[pt["entropy"] for pt in points],
            y=[max(pt["p"], floor) for pt in points],
            mode="markers",
            name="proposed tokens",
            text=[_label(pt["text"]) for pt in points],
            hovertemplate="%{text}<br>H=%{x:.2f} nats<br>p(x)=%{y:.4f}<extra></extra>",
            marker={"size": 9, "color": [ACCEPT if o else REJECT for o in ok], "line": {"width": 1, "color": "white"}},
        )
    fig.update_layout(
        xaxis={"title": "entropy H of the target distribution (nats)", "range": [0, h_max]},
        yaxis={"title": "target p(x)", "type": "log", "range": [math.log10(floor), 0], "exponentformat": "power"},
    )
    return apply(fig, title or "Typical acceptance: accepted above the curve, rejected below", height=420)


def _add_regions(fig: go.Figure, hs: list[float], thr: list[float], floor: float, name: str) -> None:
    """The rejected band (floor to the threshold curve `name`) and the accepted band above it, up to 1."""
    fig.add_scatter(x=hs, y=[floor] * len(hs), mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip")
    fig.add_scatter(
        x=hs,
        y=thr,
        mode="lines",
        fill="tonexty",
        fillcolor=tint(REJECT, 0.12),
        line={"color": "#111827", "width": 3},
        name=name,
    )
    fig.add_scatter(
        x=hs,
        y=[1.0] * len(hs),
        mode="lines",
        fill="tonexty",
        fillcolor=tint(ACCEPT, 0.12),
        line={"width": 0},
        name="accepted region",
        hoverinfo="skip",
    )


def lab_figure(lab: dict[str, Any], title: str | None = None) -> go.Figure:
    """Each rule's empirical distribution of the committed token against the target p, with TV and χ²."""
    rules = lab["rules"]
    names = []
    for r in rules:
        pv = "p < 1e-300" if r["p_value"] is None or r["p_value"] == 0 else f"p = {r['p_value']:.3g}"
        names.append(f"<b>{r['label']}</b><br>TV = {r['tv']:.3f} (exact {r['tv_exact']:.3f}), χ² {pv}")
    fig = make_subplots(rows=len(rules), cols=1, shared_xaxes=True, subplot_titles=names, vertical_spacing=0.1)
    fig.update_annotations(font={"color": "#111827"})  # each panel's title in the figure's ink, not a grey note
    x = [_label(t) for t in lab.get("texts", [str(t) for t in lab["tokens"]])] + ["(other)"]
    target = [*lab["p"], lab["p_other"]]
    for i, r in enumerate(rules, start=1):
        fig.add_bar(
            x=x,
            y=[*r["empirical"], r["other"]],
            name=f"sampled: {r['rule']}",
            row=i,
            col=1,
            marker_color=RULE_COLORS.get(r["rule"], NEUTRAL),
        )
        fig.add_scatter(
            x=x,
            y=target,
            mode="markers",
            name="target p",
            showlegend=i == 1,
            row=i,
            col=1,
            marker={"symbol": "line-ew-open", "size": 22, "line": {"width": 3}, "color": "#111827"},
        )
    fig.update_yaxes(title_text="share")
    n = lab["n"]
    apply(fig, title or f"Losslessness lab: {n:,} samples per rule vs the target p", height=220 + 230 * len(rules))
    return fig.update_layout(margin={"t": 90})


def acceptance_rate_figure(trace: Trace, title: str | None = None) -> go.Figure:
    """Proposed and accepted tokens per step."""
    steps = trace.detailed(ChainDetail)
    index = [s.index for s, _ in steps]
    fig = go.Figure()
    fig.add_bar(x=index, y=[len(d.records) for _, d in steps], name="proposed", marker_color=NEUTRAL)
    fig.add_bar(x=index, y=[d.n_accepted for _, d in steps], name="accepted", marker_color=ACCEPT)
    fig.update_layout(barmode="overlay", xaxis={"title": "step"}, yaxis={"title": "tokens"})
    return apply(fig, title or f"Drafts accepted per step (A = {trace.mean_accepted:.2f})", height=320)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """This method's own views of one trace, by name (for export)."""
    out = {"acceptance_per_step": acceptance_rate_figure(trace)}
    rejected = [s for s in trace.steps if any("dists" in r for r in records(s))]
    if rejected:
        out["decisions"] = decisions_figure(rejected[0])
        out["rejection"] = rejection_figure(records(rejected[0])[-1]["dists"])
    pts = typical_points(trace)
    if pts:
        out["typical"] = typical_figure(pts, 0.09, 0.3)
    return out
