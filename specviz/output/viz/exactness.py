"""Speculative sampling on paper: why accept-then-residual gives exactly p (three tokens, stacked bars), and the
cost model's expected speedup against the number of drafts γ for measured drafts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.output.viz.theme import ACCEPT, DRAFT, NEUTRAL, REJECT, VERIFY, apply, tint


def exact_figure(parts: dict[str, list[float]], tokens: Sequence[str]) -> go.Figure:
    """Per token: q (what is proposed), then the output stacked from min(p, q) (accepted as drafted) and the
    rejection's share of the normalised residual, beside p; the flawed rule's output for contrast."""
    names = [f"“{t}”" for t in tokens]
    fig = go.Figure()
    extra = {"resampled": {"base": parts["accepted"]}, "flawed": {"opacity": 0.75}}  # stacked; in contrast
    for part, label, colour, group in (
        ("q", "draft q(x): proposed", DRAFT, "q"),
        ("accepted", "kept as drafted: q·min(1, p/q) = min(p, q)", ACCEPT, "out"),
        ("resampled", "after a rejection: P(reject) · norm(max(0, p − q))", tint(ACCEPT, 0.45), "out"),
        ("p", "target p(x)", VERIFY, "p"),
        ("flawed", "flawed rule's output (threshold p/max p)", REJECT, "flawed"),
    ):
        fig.add_bar(x=names, y=parts[part], name=label, marker_color=colour, offsetgroup=group, **extra.get(part, {}))
    for name, a, r in zip(names, parts["accepted"], parts["resampled"], strict=True):
        fig.add_annotation(x=name, y=a + r, text=f"{a:.2f} + {r:.2f} = {a + r:.2f}", showarrow=False, yshift=14)
    fig.update_layout(barmode="group", bargap=0.2, yaxis={"title": "probability", "range": [0, 0.8]})
    fig.update_xaxes(title="token")
    return apply(fig, "Accept with min(1, p/q), resample from the residual: the output is p", height=420)


def cost_figure(
    drafts: Sequence[Any], speedup: Callable[[float, float, int, float], float], gammas: Sequence[int], where: str
) -> go.Figure:
    """Expected speedup against γ for each measured draft (solid) and for the α each would need for 1.3× at
    its own c (dashed); `speedup(α, c, γ, v)` is the cost model, `drafts` carry name, label, alpha, c, v."""
    colors = {"trained": DRAFT, "layers": NEUTRAL}  # the trained draft in the proposer's hue, the layers' grey
    fig = go.Figure()
    xs = list(gammas)
    for d in drafts:
        color = colors.get(d.name, "#334155")
        fig.add_scatter(
            x=xs,
            y=[speedup(d.alpha, d.c, g, d.v) for g in xs],
            mode="lines+markers",
            line={"color": color},
            name=f"{d.label}: α {d.alpha:.2f}, c {d.c:.2f}",
        )
        if getattr(d, "needed", None):
            fig.add_scatter(
                x=xs,
                y=[speedup(d.needed, d.c, g, d.v) for g in xs],
                mode="lines",
                line={"color": color, "dash": "dash"},
                name=f"the same c at α {d.needed:.2f}: 1.3×",
            )
    fig.add_hline(
        y=1.0,
        line={"color": "#111827", "width": 1},
        annotation_text="plain decoding",
        annotation_position="bottom right",
    )
    fig.add_hline(y=1.3, line={"color": ACCEPT, "width": 1, "dash": "dot"}, annotation_text="1.3×")
    fig.update_xaxes(title="γ: drafts per step", dtick=1)
    fig.update_yaxes(title="expected speedup (a model)")
    title = f"The cost model with measured α and c<br><sup>{where}</sup>"
    return apply(fig, title, height=440)
