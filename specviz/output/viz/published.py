"""Published speedups beside this project's: each source's speedup and A per method, the source named on the
figure (a stored file of copied numbers, docs/lesson/published.json; nothing here is measured)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.output.viz.theme import apply

SOURCE_COLORS = ("#334155", "#94a3b8", "#0d9488")  # slate, light slate, teal: sources, not methods or roles


def published_figure(data: dict[str, Any], slide: bool = False) -> go.Figure:
    """Horizontal bars, one group per method and one bar per source (speedup, with A beside it), the legend naming
    each source; the papers' own summary lines under the title, each with its citation."""
    sources = data["sources"]
    order = list(dict.fromkeys(m for s in sources for m in s["methods"]))
    fig = go.Figure()
    for color, src in zip(SOURCE_COLORS, sources, strict=False):
        rows = [(m, v) for m in order if (v := src["methods"].get(m))]
        fig.add_trace(
            go.Bar(
                y=[m for m, _ in rows],
                x=[v["speedup"] for _, v in rows],
                text=[f"{v['speedup']:.2f}× · A {v['A']:.2f}" for _, v in rows],
                textposition="outside",
                textfont={"size": 16},
                orientation="h",
                name=src["short"],
                marker_color=color,
            )
        )
    fig.add_vline(x=1, line={"color": "#0f172a", "dash": "dot", "width": 2})
    fig.update_layout(barmode="group", bargap=0.2)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=order)
    top = max(v["speedup"] for s in sources for v in s["methods"].values())
    fig.update_xaxes(title="speedup over plain decoding (×); A: tokens per target pass", range=[0, top * 1.3])
    said = " · ".join(f"{p['says']} ({p['cite']})" for p in data.get("papers", []))
    title = f"Published at 7B on GPUs, and this project on an H200<br><sup>{said}</sup>"
    return apply(fig, title, slide, 640)
