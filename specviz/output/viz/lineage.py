"""The lineage figure: one node per work, arrows labelled with what each work changed, and for the works the
app runs, the A and speedup a stored bench measured (a node without them says it is described, not measured)."""

from __future__ import annotations

import itertools
import math
import textwrap
from typing import Any

import plotly.graph_objects as go

from specviz.output.lineage import WORKS, Work, edges
from specviz.output.viz.theme import apply, method_color

DESCRIBED = "#94a3b8"


def measured_values(bench: dict[str, Any] | None) -> dict[str, tuple[float, float]]:
    """method -> (A, speedup) from a stored bench result ({"methods": {name: {...}}}); {} without one."""
    out = {}
    for name, row in ((bench or {}).get("methods") or {}).items():
        try:
            out[name] = (float(row["mean_accepted"]), float(row["speedup"]))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def node_caption(work: Work, measured: dict[str, tuple[float, float]]) -> str:
    """What the figure writes under a work's name: its measured A and speedup, or how it is shown."""
    if work.runs and not work.runs_note and work.runs in measured:
        a, s = measured[work.runs]
        return f"A {a:.2f} · {s:.2f}×"
    if work.runs:
        return "no stored bench"
    return ""  # a hollow node: described, not measured (the subtitle says so)


def _name(w: Work, width: int = 12) -> str:
    """'<b>Medusa</b> 2024'; a long name breaks after its first words, so an edge column's caption fits."""
    if len(w.name) <= width:
        return f"<b>{w.name}</b> {w.year}"
    head, _, tail = w.name.rpartition(" ")
    return f"<b>{head}<br>{tail}</b> {w.year}"


def _hover(w: Work) -> str:
    return (
        f"<b>{w.name}</b> ({w.authors}, {w.year}{', arXiv:' + w.arxiv if w.arxiv else ''})<br>"
        f"drafts: {w.drafts}<br>candidates: {w.organised}<br>lossless: {w.lossless}<br>step: {w.bound}"
    )


def _ends(x0: float, y0: float, x1: float, y1: float, px: float = 18) -> tuple[float, float, float, float]:
    """Where an arrow starts and ends, short of its nodes: from a node's side, except that a steeply rising arrow
    (over 30°) leaves from the node's top (clear of the labels beside it and of a level arrow's label) and reaches
    a top-row node from below (below any other node is its caption), and a steeply falling one reaches its node's
    top. Pixels at the figure's usual scale: about
    150 per column, 71 per row."""
    dx, dy = (x1 - x0) * 150, (y1 - y0) * 71
    if abs(dy) <= 0.6 * abs(dx):
        return x0 + 0.12, y0, x1 - 0.12, y1
    norm = math.hypot(dx, dy)
    ox, oy = px * dx / norm / 150, px * dy / norm / 71
    if dy > 0:  # falling steeply: into the child's top, clear of the level arrow's label beside it
        return x0 + ox, y0 + oy, x1 - ox, y1 - oy
    return (x0 + ox, y0 + oy, *((x1 - ox, y1 - oy) if y1 < 0.5 else (x1 - 0.12, y1)))


ELBOW = 0.5  # columns: wider than half a node's name at a 1280 px window (about 100 px a column)


def _route(x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    """The points an arrow passes. Straight, except beside a node captioned below: a rising arrow into it turns
    level ELBOW columns before it, a falling one out of it leaves level for ELBOW columns, so neither crosses the
    node's name."""
    if y1 < y0 - 0.05 and y1 >= 0.5:
        bend = (x1 - ELBOW, y1)
        return [_ends(x0, y0, *bend)[:2], bend, (x1 - 0.12, y1)]
    if y1 > y0 + 0.05 and y0 >= 0.5:
        bend = (x0 + ELBOW, y0)
        return [(x0 + 0.12, y0), bend, _ends(*bend, x1, y1)[2:]]
    ax, ay, ex, ey = _ends(x0, y0, x1, y1)
    return [(ax, ay), (ex, ey)]


def _sloping_leg(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    """The part of an arrow's route that is not level (all of it when it has no bend), node to node."""
    route = _route(x0, y0, x1, y1)
    if len(route) == 2:
        return x0, y0, x1, y1
    return (x0, y0, *route[1]) if route[1][1] == y1 else (*route[1], x1, y1)


def _wrap(text: str) -> str:
    """A caption's lines of over 16 characters (a column at the lesson's 1460 px) wrapped at 12, so neighbours
    keep apart."""
    lines = [
        w
        for line in text.split("<br>")
        for w in ([line] if len(line) <= 16 else textwrap.wrap(line, 12, break_long_words=False))
    ]
    return "<br>".join(lines)


def _edge_text(why: str) -> str:
    """An arrow's label in lines of 16 characters (a column at the lesson's 1460 px), one line where it fits."""
    return "<br>".join(textwrap.wrap(why, 16))


COL_PX, ROW_PX = 147, 52  # a column and a row at the projector's narrowest (the lesson in a 1280 px window)


def _label_place(
    x0: float, y0: float, x1: float, y1: float, text: str, size: float, level_from: float | None = None
) -> dict[str, Any]:
    """Where an arrow's label goes, clear of the captions under the nodes: above a level arrow; beside a sloping
    one, its centre off the line by just more than its half-extent across the line (the label's box, estimated
    from its type, never reaches the line), on the side that faces up the screen (rows grow downward); beside an
    upright leg that falls from a level part (`level_from`: the node it leaves), on the side away from that node,
    whose caption runs down beside the leg's top."""
    if abs(y1 - y0) < 0.05:
        return {"x": (x0 + x1) / 2, "y": y0 - 0.1, "yanchor": "bottom"}
    # two thirds of the way down the leg: below the captions of a row it leaves, clear of the row above's arrows
    (ux, uy), (lx, ly) = sorted(((x0, y0), (x1, y1)), key=lambda p: p[1])
    mx, my = ux + (lx - ux) * 2 / 3, uy + (ly - uy) * 2 / 3
    rows = text.split("<br>")
    w, h = 0.55 * size * max(len(r) for r in rows), 1.25 * size * len(rows)  # px, as tests/layout.py estimates
    dx, dy = (x1 - x0) * COL_PX, (y1 - y0) * ROW_PX
    norm = math.hypot(dx, dy)
    nx, ny = -dy / norm, dx / norm  # a normal, turned to point up the screen (toward smaller rows)
    if ny > 0:
        nx, ny = -nx, -ny
    if abs(dx) < 1 and level_from is not None:
        nx = 1.0 if level_from < x0 else -1.0
    off = w / 2 * abs(nx) + h / 2 * abs(ny) + 8
    return {"x": mx + nx * off / COL_PX, "y": my + ny * off / ROW_PX, "xanchor": "center", "yanchor": "middle"}


def lineage_figure(bench: dict[str, Any] | None, where: str = "", slide: bool = False) -> go.Figure:
    """The works laid out by generation (x) with labelled arrows from each parent to its child."""
    measured = measured_values(bench)
    fig = go.Figure()
    line = {"color": "#64748b", "width": 1.5}
    for parent, child, why in edges():
        (x0, y0), (x1, y1) = parent.place, child.place
        points = _route(x0, y0, x1, y1)
        for (sx, sy), (tx, ty) in itertools.pairwise(points[:-1]):  # the legs before the arrow's last
            fig.add_shape(type="line", x0=sx, y0=sy, x1=tx, y1=ty, line=line)
        (ax, ay), (ex, ey) = points[-2:]
        fig.add_annotation(
            x=ex, y=ey, ax=ax, ay=ay, xref="x", yref="y", axref="x", ayref="y",
            showarrow=True, arrowhead=3, arrowwidth=1.5, arrowcolor=line["color"], text="",
        )  # fmt: skip
        if why:
            text, size = _edge_text(why), 16 if slide else 11
            leg = _sloping_leg(x0, y0, x1, y1)
            level_from = x0 if len(points) > 2 and y1 > y0 else None  # a falling arrow leaves its node level
            fig.add_annotation(**_label_place(*leg, text, 16, level_from), text=text,
                               showarrow=False, font={"size": size, "color": "#475569"})  # fmt: skip
    for w in WORKS:
        runs = bool(w.runs)
        fig.add_scatter(
            x=[w.place[0]],
            y=[w.place[1]],
            mode="markers+text",
            marker={
                "size": 24 if slide else 18,
                "color": method_color(w.runs) if runs else "white",
                "line": {"color": method_color(w.runs) if runs else DESCRIBED, "width": 3},
            },
            text=["<br>".join(x for x in (_name(w), _wrap(node_caption(w, measured))) if x)],
            textposition="top center" if w.place[1] < 0.5 else "bottom center",  # the top row: captions above
            textfont={"size": 16 if slide else 11},
            cliponaxis=False,  # the top row's captions run into the margin above the plot
            hovertext=[_hover(w)],
            hoverinfo="text",
            showlegend=False,
        )
    # room left of column 0 and right of column 6 for half a caption, at a page column as narrow as 800 px (a
    # 1280 px window): about 100 px a column, so no caption line is wider than a column
    fig.update_xaxes(visible=False, range=[-0.7, 6.45])
    fig.update_yaxes(visible=False, range=[5.0, -1.6])  # row 0 at the top, its captions above it
    title = "From blockwise decoding to DFlash"
    sub = f"filled: runs here (A · speedup, {where or 'stored benches'}); hollow: not measured"
    fig.update_layout(meta={"badge": "inside"})  # the corner under DFlash is empty: a badge goes there (deck.badge)
    return apply(fig, f"{title}<br><sup>{sub}</sup>", slide=slide, height=660)
