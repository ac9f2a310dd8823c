"""When speculation stops paying: measured speedup against batch size and context length, and the region.

Every number drawn here is recomputed from the runs a batched bench stored (specviz.tuning.batched_bench: each
point keeps its repeats as plain numbers): the median over runs and its range, never the point's summary
and never a model. A point is one method at one (batch, context); context None is the prompt set's own
short prompts.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.output.viz.theme import LEGEND_BELOW, apply, method_color

Point = dict[str, Any]


def merge(results: Iterable[dict[str, Any]]) -> list[Point]:
    """The points of several batched bench results; a later result's point replaces an earlier one's."""
    found: dict[tuple[str, int, int | None], Point] = {}
    for res in results:
        for p in res.get("points", []):
            found[(p["method"], int(p["batch"]), p.get("context"))] = p
    return list(found.values())


def from_runs(point: Point, key: str) -> tuple[float, float, float]:
    """(median, low, high) of `key` over the point's stored runs."""
    values = [float(r[key]) for r in point["runs"]]
    if not values:
        raise ValueError(f"{point['method']} at batch {point['batch']} has no runs.")
    return statistics.median(values), min(values), max(values)


def curve(points: list[Point], method: str, axis: str, fixed: dict[str, Any]) -> list[Point]:
    """One method's points along `axis` ('batch' or 'context') with the other coordinate as in `fixed`."""
    pts = [
        p
        for p in points
        if p["method"] == method and p.get(axis) is not None and all(p.get(k) == v for k, v in fixed.items())
    ]
    return sorted(pts, key=lambda p: int(p[axis]))


def _methods(points: list[Point]) -> list[str]:
    return list(dict.fromkeys(p["method"] for p in points))


def curve_figure(points: list[Point], axis: str, fixed: dict[str, Any], slide: bool = False) -> go.Figure:
    """Speedup (with its range over repeats), A and r against batch size or context length, per method."""
    label = {"batch": "batch size (requests decoded together)", "context": "context length (prompt tokens)"}[axis]
    fig = make_subplots(1, 3, subplot_titles=("speedup (×)", "A: tokens per row-forward", "r: step cost (×)"))
    for name in _methods(points):
        pts = curve(points, name, axis, fixed)
        if not pts:
            continue
        xs = [str(p[axis]) for p in pts]
        for col, key in enumerate(("speedup", "A", "r"), 1):
            mid = [from_runs(p, key) for p in pts]
            fig.add_scatter(
                x=xs,
                y=[m for m, _, _ in mid],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [h - m for m, _, h in mid],
                    "arrayminus": [m - lo for m, lo, _ in mid],
                    "thickness": 1.5,
                },
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=col == 1,
                line={"color": method_color(name), "width": 3},
                marker={"size": 9},
                row=1,
                col=col,
            )
    for col in (1, 3):
        fig.add_hline(y=1, line_dash="dot", line_color="#6b7280", row=1, col=col)  # pyright: ignore[reportArgumentType]
    fig.update_xaxes(title=label, type="category")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(legend=LEGEND_BELOW)
    what = "batch size" if axis == "batch" else "context length"
    return _subplot_titles(apply(fig, f"Measured: speedup, A and r against {what}", slide=slide, height=380), slide)


def _subplot_titles(fig: go.Figure, slide: bool) -> go.Figure:
    """Subplot titles (this module's only annotations) at the size of the theme's axis titles."""
    return fig.update_annotations(font_size=22 if slide else 14)


def grid(points: list[Point], method: str) -> tuple[list[int], list[int], list[list[float | None]]]:
    """(batches, contexts, speedup[context][batch]) over the points that have a context, from their runs."""
    pts = [p for p in points if p["method"] == method and p.get("context") is not None]
    batches = sorted({int(p["batch"]) for p in pts})
    lengths = sorted({int(p["context"]) for p in pts})
    cell = {(int(p["batch"]), int(p["context"])): from_runs(p, "speedup")[0] for p in pts}
    return batches, lengths, [[cell.get((b, n)) for b in batches] for n in lengths]


def region_figure(points: list[Point], slide: bool = False) -> go.Figure:
    """Per method, the measured speedup over (batch, context): green where it beats plain decoding, red where
    it loses, each cell labelled, and the 1× crossing drawn between the cells (interpolated)."""
    names = [n for n in _methods(points) if n != "ar" and grid(points, n)[2]]
    fig = make_subplots(1, max(1, len(names)), subplot_titles=names or ["no measured grid"], shared_yaxes=True)
    for col, name in enumerate(names, 1):
        batches, lengths, z = grid(points, name)
        fig.add_heatmap(
            x=list(range(len(batches))),
            y=list(range(len(lengths))),
            z=z,
            zmid=1.0,
            zmin=0.5,
            zmax=1.5,
            colorscale=[[0, "#b2182b"], [0.5, "#f7f7f7"], [1, "#1b7837"]],
            text=[[f"{v:.2f}×" if v is not None else "" for v in row] for row in z],
            texttemplate="%{text}",
            showscale=col == len(names),
            colorbar={"title": "speedup"},
            hovertemplate="batch %{customdata[0]}, context %{customdata[1]}: %{z:.2f}×<extra></extra>",
            customdata=[[[b, n] for b in batches] for n in lengths],
            row=1,
            col=col,
        )
        if len(batches) > 1 and len(lengths) > 1:
            _crossing(fig, len(batches), len(lengths), z, col)
        fig.update_xaxes(
            tickvals=list(range(len(batches))), ticktext=[str(b) for b in batches], title="batch", row=1, col=col
        )
        fig.update_yaxes(tickvals=list(range(len(lengths))), ticktext=[str(n) for n in lengths], row=1, col=col)
    fig.update_yaxes(title="context (tokens)", row=1, col=1)
    fig.update_layout(legend=LEGEND_BELOW)
    title = "Where speculation pays: measured speedup by batch and context"
    return _subplot_titles(apply(fig, title, slide=slide, height=400), slide)


def _crossing(fig: go.Figure, nb: int, nl: int, z: list[list[float | None]], col: int) -> None:
    """The 1× contour over one method's grid, interpolated between the measured cells."""
    fig.add_contour(
        x=list(range(nb)),
        y=list(range(nl)),
        z=z,
        contours={"start": 1.0, "end": 1.0, "size": 1.0, "coloring": "none"},
        line={"color": "#111827", "width": 3, "dash": "dash"},
        showscale=False,
        hoverinfo="skip",
        name="1× crossing",
        showlegend=col == 1,
        row=1,
        col=col,
    )


def where_it_stops(points: list[Point], axis: str, fixed: dict[str, Any]) -> dict[str, int | None]:
    """Per method, the first measured `axis` value (batch size or context) at which its median speedup is
    below 1×; None when it never drops below 1× over the measured range."""
    out: dict[str, int | None] = {}
    for name in _methods(points):
        if name == "ar" or not (pts := curve(points, name, axis, fixed)):
            continue
        out[name] = next((int(p[axis]) for p in pts if from_runs(p, "speedup")[0] < 1.0), None)
    return out
