"""Published speedups beside this project's: each source's speedup and A per method, the source named on the
figure (a stored file of copied numbers, docs/lesson/published.json; nothing here is measured)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.output.viz.theme import apply

SOURCE_COLORS = ("#334155", "#94a3b8", "#0d9488")  # slate, light slate, teal: sources, not methods or roles


def published_figure(data: dict[str, Any], slide: bool = False) -> go.Figure:
    """One panel per source (its name under it), one bar per method (speedup, with A beside it), the methods in one
    order down every panel; the papers' own summary lines under the title, each with its citation. Panels, not
    grouped bars: three sources' bars in one group were too thin for their labels on a projector."""
    sources = data["sources"]
    order = list(dict.fromkeys(m for s in sources for m in s["methods"]))
    fig = make_subplots(rows=1, cols=len(sources), shared_yaxes=True)
    top = max(v["speedup"] for s in sources for v in s["methods"].values())
    for col, (color, src) in enumerate(zip(SOURCE_COLORS, sources, strict=False), start=1):
        rows = [(m, v) for m in order if (v := src["methods"].get(m))]
        y, x = [m for m, _ in rows], [v["speedup"] for _, v in rows]
        bars = go.Bar(y=y, x=x, orientation="h", name=src["short"], marker_color=color, showlegend=False)
        fig.add_trace(bars, row=1, col=col)
        # each label right of its bar, or of the 1× line where the bar stops short of it (never across the line)
        labels = go.Scatter(
            y=y,
            x=[max(v, 1) + 0.08 for v in x],
            text=[f"{v['speedup']:.2f}× · A {v['A']:.2f}" for _, v in rows],
            mode="text",
            textposition="middle right",
            cliponaxis=False,
            showlegend=False,
            hoverinfo="skip",
        )
        fig.add_trace(labels, row=1, col=col)
        fig.add_shape(
            type="line",
            x0=1,
            x1=1,
            y0=0,
            y1=1,
            yref="y domain",
            line={"color": "#0f172a", "dash": "dot", "width": 2},
            row=1,
            col=col,
        )
        # the source under its panel, in lines that fit it (the top right holds the badge)
        name = src["short"].replace(": ", "<br>", 1).replace(", ", "<br>", 1)
        fig.update_xaxes(range=[0, top * 1.75], title=name, row=1, col=col)
    fig.update_layout(bargap=0.25, uniformtext={"minsize": 16, "mode": "show"})
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=order)
    said = "<br>".join(f"{p['says']} ({p['cite']})" for p in data.get("papers", []))  # a paper a line
    title = f"Published at 7B on GPUs, and this project on an H200<br><sup>{said}</sup>"
    return apply(fig, title, slide, 640)
