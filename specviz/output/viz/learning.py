"""What data buys, drawn: held-out top-1 against the training positions seen, one line per stored learning curve
and one marker per recorded experiment row, coloured by where the data came from."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from specviz.output.viz.theme import LEGEND_BELOW, apply
from specviz.tuning.learning import DATA_NAMES, KIND_NAMES, Checkpoint, Curve, Row

# the target's own text in greens (the corpus it answers, the greedy text it continues), ShareGPT's in orange
DATA_COLORS = {
    "corpus": "#009e73",
    "corpus-sampled": "#009e73",
    "corpus-greedy": "#56b4e9",
    "corpus-opening": "#cc79a7",
    "self-distilled": "#0072b2",
    "sharegpt": "#e69f00",
}
MIXED = "#7c3aed"
# each training kind (KIND_NAMES: the methods' cards, in order) its own dash and marker, handed out in turn
DASHES = ("longdash", "dot", "dash", "solid", "dashdot", "longdashdot")
SYMBOLS = ("star", "square", "triangle-up", "circle", "diamond", "cross", "x", "pentagon", "hexagon", "star-square")
KIND_DASH = {kind: DASHES[i % len(DASHES)] for i, kind in enumerate(KIND_NAMES)}
KIND_SYMBOL = {kind: SYMBOLS[i % len(SYMBOLS)] for i, kind in enumerate(KIND_NAMES)}


def _color(data: tuple[str, ...]) -> str:
    return DATA_COLORS.get(data[0], MIXED) if len(data) == 1 else MIXED


def _curve_traces(c: Curve, depth: int, said: set[str]) -> list[go.Scatter]:
    """A stored curve as a line from its first trained point (dotted when it fine-tuned a trained head), and its
    start as a lone marker (a log axis has no 0), named once where several curves start alike (`said`)."""
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
        line={"color": _color(c.data), "dash": "dot" if c.start else KIND_DASH.get(c.kind, "solid"), "width": 3},
        marker={"symbol": KIND_SYMBOL.get(c.kind, "circle"), "size": 8},
        hovertemplate="%{x:,} positions: top-1 %{y:.3f}<extra>" + c.label + "</extra>",
    )
    if start is None:
        return [line]
    name = f"start: {c.start}" if c.start else "untrained"
    key = f"{name} {start[1]:.1f}"  # starts within a tenth of each other sit close enough for their labels to collide
    shown = "" if key in said else name
    said.add(key)
    lone = go.Scatter(
        x=[pts[0][0] / 4],
        y=[start[1]],
        mode="markers+text",
        marker={"symbol": KIND_SYMBOL.get(c.kind, "circle") + "-open", "size": 9, "color": _color(c.data)},
        text=[shown],
        textposition="top center",
        showlegend=False,
        hovertemplate=f"{name}: top-1 %{{y:.3f}}<extra>{c.label}</extra>",
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


def _spread_start_labels(fig: go.Figure) -> None:
    """A start's label goes under its marker where another start's label sits just above it, near on the log axis
    (Medusa's and Hydra's starts, 0.08 apart, wrote one label over the other)."""
    traces: list[Any] = list(fig.data)
    shown = [t for t in traces if t.mode == "markers+text" and t.text and t.text[0]]
    for t in shown:
        if any(abs(math.log10(o.x[0] / t.x[0])) < 0.5 and 0 < o.y[0] - t.y[0] < 0.12 for o in shown if o is not t):
            t.textposition = "bottom center"


def learning_figure(curves: list[Curve], rows: list[Row], depth: int = 1, slide: bool = False) -> go.Figure:
    """Held-out top-1 at `depth` (a head's k-th drafted token; a draft model's only one) against positions seen."""
    fig, said = go.Figure(), set()
    for c in curves:
        fig.add_traces(_curve_traces(c, depth, said))
    _spread_start_labels(fig)
    for data in dict.fromkeys(r.data for r in rows if len(r.top1) >= depth):
        fig.add_trace(_rows_trace(rows, data, depth))
    # a label at each power of ten alone: between them plotly writes 2 … 9 at 3/4 of the type, under 16 px projected
    fig.update_xaxes(type="log", title="training positions seen (log scale)", dtick=1)
    top = max([y for t in fig.data for y in (t.y or ())] + [0.1])  # type: ignore[attr-defined]
    fig.update_yaxes(title=f"held-out top-1 at depth {depth}", range=[0, top * 1.12])  # room for the start labels
    fig.update_layout(legend=LEGEND_BELOW)
    title = (
        "What data buys: held-out top-1 by positions trained"
        "<br><sup>lines: stored curves (dotted: fine-tuned); markers: recorded runs (hollow: fine-tuned)"
        "<br>green, blue: the target's own text; orange: ShareGPT's · ● EAGLE-2, ■ Medusa, ★ draft model</sup>"
    )
    return apply(fig, title, slide=slide, height=520)


def a_by_head_figure(heads: list[Checkpoint], a: list[float], slide: bool = False) -> go.Figure:
    """A (tokens per target forward) of EAGLE-2 on one prompt with each shipped head, coloured by its data."""
    names = [f"{DATA_NAMES.get(h.data, h.data)}<br>{h.positions:,} positions" for h in heads]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=a,
            marker_color=[DATA_COLORS.get(h.data, MIXED) for h in heads],
            text=[f"A {v:.2f}" for v in a],
            textposition="outside",
            hovertext=[h.folder for h in heads],
            hovertemplate="%{hovertext}: A %{y:.2f}<extra></extra>",
        )
    )
    fig.update_yaxes(title="A: tokens per target forward", range=[0, max([*a, 1.0]) * 1.2])
    title = (
        "EAGLE-2 on this prompt, head by head<br><sup>the same tree and settings; only the head's data differs</sup>"
    )
    return apply(fig, title, slide=slide, height=420)
