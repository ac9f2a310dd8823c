"""The lineage figure: one node per work, arrows labelled with what each work changed, and for the works the
app runs, the A and speedup a stored bench measured (a node without them says it is described, not measured)."""

from __future__ import annotations

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
        return f"runs here ({work.runs_note or work.runs})<br>not in the stored bench"
    return "described, not measured"


def _name(w: Work, width: int = 16) -> str:
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
    leaves from the node's top (clear of the labels beside it) and reaches a top-row node from below (below any
    other node is its caption). Pixels at the figure's usual scale: about 150 per column, 71 per row."""
    dx, dy = (x1 - x0) * 150, (y1 - y0) * 71
    if dy >= 0 or abs(dy) <= abs(dx):
        return x0 + 0.12, y0, x1 - 0.12, y1
    norm = math.hypot(dx, dy)
    ox, oy = px * dx / norm / 150, px * dy / norm / 71
    return (x0 + ox, y0 + oy, *((x1 - ox, y1 - oy) if y1 < 0.5 else (x1 - 0.12, y1)))


def _label_place(x0: float, y0: float, x1: float, y1: float) -> dict[str, Any]:
    """Where an arrow's label goes, clear of the captions under the nodes: above a level arrow; beside the
    middle of a sloping one, on the side that faces away from the node captions (rows grow downward)."""
    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
    if abs(y1 - y0) < 0.05:
        return {"x": mx, "y": my - 0.1, "yanchor": "bottom"}
    if y1 < y0:  # rising to the right: the label above the line, on its left
        return {"x": mx - 0.05, "y": my, "xanchor": "right", "yanchor": "middle"}
    return {"x": mx + 0.05, "y": my, "xanchor": "left", "yanchor": "middle"}


def lineage_figure(bench: dict[str, Any] | None, where: str = "", slide: bool = False) -> go.Figure:
    """The works laid out by generation (x) with labelled arrows from each parent to its child."""
    measured = measured_values(bench)
    fig = go.Figure()
    for parent, child, why in edges():
        (x0, y0), (x1, y1) = parent.place, child.place
        ax, ay, ex, ey = _ends(x0, y0, x1, y1)
        fig.add_annotation(
            x=ex, y=ey, ax=ax, ay=ay, xref="x", yref="y", axref="x", ayref="y",
            showarrow=True, arrowhead=3, arrowwidth=1.5, arrowcolor="#64748b", text="",
        )  # fmt: skip
        if why:
            fig.add_annotation(**_label_place(x0, y0, x1, y1), text="<br>".join(textwrap.wrap(why, 16)),
                               showarrow=False, font={"size": 15 if slide else 10, "color": "#475569"})  # fmt: skip
    for w in WORKS:
        runs = bool(w.runs)
        fig.add_scatter(
            x=[w.place[0]],
            y=[w.place[1]],
            mode="markers+text",
            marker={
                "size": 30 if slide else 22,
                "color": method_color(w.runs) if runs else "white",
                "line": {"color": method_color(w.runs) if runs else DESCRIBED, "width": 3},
            },
            text=[f"{_name(w)}<br>{node_caption(w, measured)}"],
            textposition="top center" if w.place[1] < 0.5 else "bottom center",  # the top row: captions above
            textfont={"size": 16 if slide else 11},
            hovertext=[_hover(w)],
            hoverinfo="text",
            showlegend=False,
        )
    # room left of column 0 and right of column 6 for half a caption, at a page column as narrow as 800 px
    fig.update_xaxes(visible=False, range=[-0.9, 6.75])
    fig.update_yaxes(visible=False, range=[5.9, -1.6])  # row 0 at the top
    title = "From blockwise decoding to DFlash: what each work changed"
    sub = f"filled: runs here, A and speedup {where}" if where else "filled: runs here"
    sub += " · hollow: described, not measured"
    return apply(fig, f"{title}<br><sup>{sub}</sup>", slide=slide, height=660)
