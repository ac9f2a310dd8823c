"""What data buys, drawn: held-out top-1 against the training positions seen, one line per stored learning curve
and one marker per recorded experiment row, coloured by where the data came from."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.output.viz.theme import LEGEND_BELOW, apply
from specviz.tuning.learning import DATA_NAMES, KIND_NAMES, Curve, Row

# the target's own text in greens (the corpus it answers, the greedy text it continues), ShareGPT's in orange
DATA_COLORS = {"corpus": "#009e73", "self-distilled": "#0072b2", "sharegpt": "#e69f00"}
MIXED = "#7c3aed"
KIND_DASH = {"eagle": "solid", "eagle3": "dashdot", "medusa": "dot", "hydra": "dash", "draft": "longdash"}
KIND_SYMBOL = {"eagle": "circle", "eagle3": "diamond", "medusa": "square", "hydra": "triangle-up", "draft": "star"}


def _color(data: tuple[str, ...]) -> str:
    return DATA_COLORS.get(data[0], MIXED) if len(data) == 1 else MIXED


def _curve_traces(c: Curve, depth: int) -> list[go.Scatter]:
    """A stored curve as a line from its first trained point, and its untrained start as a lone marker (a log
    axis has no 0)."""
    pts = c.top1(depth)
    start = pts[0] if pts and pts[0][0] == 0 else None
    pts = pts[1:] if start else pts
    if not pts:
        return []
    line = go.Scatter(
        x=[n for n, _ in pts],
        y=[y for _, y in pts],
        mode="lines+markers",
        name=c.label,
        line={"color": _color(c.data), "dash": KIND_DASH.get(c.kind, "solid"), "width": 3},
        marker={"symbol": KIND_SYMBOL.get(c.kind, "circle"), "size": 8},
        hovertemplate="%{x:,} positions: top-1 %{y:.3f}<extra>" + c.label + "</extra>",
    )
    if start is None:
        return [line]
    lone = go.Scatter(
        x=[pts[0][0] / 4],
        y=[start[1]],
        mode="markers+text",
        marker={"symbol": KIND_SYMBOL.get(c.kind, "circle") + "-open", "size": 9, "color": _color(c.data)},
        text=["untrained"],
        textposition="top center",
        showlegend=False,
        hovertemplate=f"untrained: top-1 %{{y:.3f}}<extra>{c.label}</extra>",
    )
    return [lone, line]


def _rows_trace(rows: list[Row], data: str, depth: int) -> go.Scatter:
    """The recorded runs on one kind of data as markers (hollow where fine-tuned from a trained head)."""
    mine = [r for r in rows if r.data == data and len(r.top1) >= depth]
    color = DATA_COLORS.get(data, MIXED)
    return go.Scatter(
        x=[r.positions for r in mine],
        y=[r.top1[depth - 1] for r in mine],
        mode="markers",
        name=f"recorded runs · {DATA_NAMES.get(data, data)}",
        marker={
            "color": color,
            "size": 13,
            "symbol": [KIND_SYMBOL.get(r.kind, "circle") + ("" if r.fresh else "-open") for r in mine],
            "line": {"width": 2, "color": color},
        },
        text=[f"{KIND_NAMES.get(r.kind, r.kind)}: {r.label}" for r in mine],
        hovertemplate="%{text}<br>%{x:,} positions: top-1 %{y:.3f}<extra></extra>",
    )


def learning_figure(curves: list[Curve], rows: list[Row], depth: int = 1, slide: bool = False) -> go.Figure:
    """Held-out top-1 at `depth` (a head's k-th drafted token; a draft model's only one) against positions seen."""
    fig = go.Figure()
    for c in curves:
        fig.add_traces(_curve_traces(c, depth))
    for data in dict.fromkeys(r.data for r in rows if len(r.top1) >= depth):
        fig.add_trace(_rows_trace(rows, data, depth))
    fig.update_xaxes(type="log", title="training positions seen (log scale)")
    fig.update_yaxes(title=f"held-out top-1 at depth {depth}", rangemode="tozero")
    fig.update_layout(legend=LEGEND_BELOW)
    title = (
        "What data buys: held-out top-1 by positions trained"
        "<br><sup>lines: stored learning curves; markers: recorded runs (hollow: fine-tuned from a trained head)"
        "<br>green, blue: the target's own text; orange: ShareGPT's · ● EAGLE-2, ■ Medusa, ★ the draft model</sup>"
    )
    return apply(fig, title, slide=slide, height=520)
