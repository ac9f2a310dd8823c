"""Figures that compare methods: speedup, A and r, throughput, acceptance, length, category, batch, hardware."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.core.measure import acceptance_series
from specviz.core.trace import Trace
from specviz.output.viz.labels import annotate
from specviz.output.viz.theme import NEUTRAL, apply, method_color
from specviz.tuning.compare import LengthPoint, Row
from specviz.tuning.hardware import Surface


def _colors(names: list[str]) -> list[str]:
    return [method_color(n) for n in names]


def speedup_figure(rows: list[Row], title: str = "Measured speedup over plain decoding", slide: bool = False):
    """One bar per method: measure.speedup against ar on the same prompt (median of the pairs, spread on hover)."""
    names = [r.method for r in rows]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[r.speedup for r in rows],
            marker_color=_colors(names),
            text=[f"{r.speedup:.2f}×" + (" ≠" if r.identical is False else "") for r in rows],
            textposition="outside",
            customdata=[r.label or f"{r.speedup:.2f}×" for r in rows],
            hovertemplate="%{x}: %{customdata} (≠ marks greedy output different from ar)<extra></extra>",
        )
    )
    fig.add_hline(y=1, line_dash="dot", line_color="#6b7280")
    fig.update_yaxes(title="speedup (×)", rangemode="tozero")
    return apply(fig, title, slide=slide, height=360)


def a_r_figure(rows: list[Row], slide: bool = False) -> go.Figure:
    """Left: A and r side by side. Right: A/r against the measured speedup (the diagonal is exact)."""
    fig = make_subplots(1, 2, subplot_titles=("A (tokens per pass) and r (step cost)", "A / r against measured"))
    names = [r.method for r in rows]
    fig.add_bar(x=names, y=[r.mean_accepted for r in rows], name="A", marker_color="#334155", row=1, col=1)
    fig.add_bar(x=names, y=[r.step_cost for r in rows], name="r", marker_color=NEUTRAL, row=1, col=1)
    top = max([r.speedup for r in rows] + [r.predicted for r in rows] + [1.0]) * 1.3  # room for a label on the right
    fig.add_scatter(
        x=[0, top],
        y=[0, top],
        mode="lines",
        line={"dash": "dot", "color": "#9ca3af"},
        name="A/r = speedup",
        row=1,
        col=2,
    )
    points = [(r.predicted, r.speedup) for r in rows]
    fig.add_scatter(
        x=[p[0] for p in points],
        y=[p[1] for p in points],
        mode="markers",
        customdata=names,
        marker={"size": 14, "color": _colors(names)},
        name="methods",
        hovertemplate="%{customdata}: A/r %{x:.2f}, measured %{y:.2f}×<extra></extra>",
        row=1,
        col=2,
    )
    annotate(fig, points, names, (0, top), (0, top), row=1, col=2, diagonal=True)  # no two labels overlap
    fig.update_xaxes(title="A / r", range=[0, top], row=1, col=2)
    fig.update_yaxes(title="measured speedup", range=[0, top], row=1, col=2)
    fig.update_layout(barmode="group")
    return apply(fig, None, slide=slide, height=380)


def throughput_figure(rows: list[Row], slide: bool = False) -> go.Figure:
    """Tokens per second and time to first token per method."""
    names = [r.method for r in rows]
    fig = make_subplots(1, 2, subplot_titles=("tokens / s", "time to first token (ms)"))
    fig.add_bar(x=names, y=[r.tokens_per_s for r in rows], marker_color=_colors(names), row=1, col=1, showlegend=False)
    fig.add_bar(x=names, y=[r.ttft_ms for r in rows], marker_color=_colors(names), row=1, col=2, showlegend=False)
    return apply(fig, None, slide=slide, height=320)


def accepted_histogram(traces: dict[str, Trace], slide: bool = False) -> go.Figure:
    """How many tokens each step committed, per method (the bonus token counts)."""
    fig = go.Figure()
    for name, t in traces.items():
        fig.add_histogram(
            x=[s.accepted for s in t.steps],
            name=name,
            marker_color=method_color(name),
            xbins={"start": 0.5, "size": 1},
            histnorm="percent",
        )
    # grouped, one bar per method at each length, as a share of that method's steps: every distribution reads
    fig.update_layout(barmode="group", bargap=0.15, bargroupgap=0.05)
    fig.update_xaxes(title="tokens committed in one step", dtick=1)
    fig.update_yaxes(title="share of the method's steps (%)")
    return apply(fig, "Accepted length per step", slide=slide, height=340)


def acceptance_rate_figure(traces: dict[str, Trace], slide: bool = False) -> go.Figure:
    """Accepted draft tokens / drafted tokens, per step (faint) and cumulatively (bold)."""
    fig = go.Figure()
    for name, t in traces.items():
        if not any(s.forward_tokens > 1 for s in t.steps):
            continue  # plain decoding drafts nothing
        per, cum = acceptance_series(t)
        c = method_color(name)
        fig.add_scatter(y=per, mode="lines", line={"color": c, "width": 1}, opacity=0.35, name=f"{name} per step")
        fig.add_scatter(y=cum, mode="lines", line={"color": c, "width": 3}, name=f"{name} cumulative")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="accepted drafts / drafted tokens", range=[0, 1.02])
    return apply(fig, "Draft acceptance rate", slide=slide, height=340)


def length_figure(points: list[LengthPoint], slide: bool = False) -> go.Figure:
    """Speedup against output length."""
    fig = go.Figure()
    for name in dict.fromkeys(p.method for p in points):
        pts = [p for p in points if p.method == name]
        fig.add_scatter(
            x=[p.max_new_tokens for p in pts],
            y=[p.speedup for p in pts],
            mode="lines+markers",
            name=name,
            line={"color": method_color(name), "width": 3},
            marker={"size": 9},
        )
    fig.update_xaxes(title="max new tokens", type="category")
    fig.update_yaxes(title="speedup (×)", rangemode="tozero")
    return apply(fig, "Speedup against output length", slide=slide, height=340)


def batch_figure(surface: Surface, modeled: dict[str, list[float]], slide: bool = False) -> go.Figure:
    """Left: the measured latency surface. Right: MODELED speedup against batch size."""
    fig = make_subplots(1, 2, subplot_titles=("measured: forward latency (ms)", "MODEL: speedup against batch"))
    fig.add_heatmap(
        z=surface.ms,
        x=[str(k) for k in surface.ks],
        y=[str(b) for b in surface.batches],
        colorscale="Viridis",
        text=[[f"{v:.0f}" for v in row] for row in surface.ms],
        texttemplate="%{text}",
        colorbar={"x": 0.44, "title": "ms"},
        row=1,
        col=1,
    )
    for name, ys in modeled.items():
        fig.add_scatter(
            x=surface.batches,
            y=ys,
            mode="lines+markers",
            name=f"{name} (model)",
            line={"color": method_color(name), "width": 3, "dash": "dash"},
            row=1,
            col=2,
        )
    # plotly's add_hline is unannotated, so its row/col ("all" by default) read as str; it takes subplot ints
    fig.add_hline(y=1, line_dash="dot", line_color="#6b7280", row=1, col=2)  # pyright: ignore[reportArgumentType]
    fig.update_xaxes(title="new tokens per sequence", row=1, col=1)
    fig.update_yaxes(title="batch size", row=1, col=1)
    fig.update_xaxes(title="batch size", type="log", tickvals=surface.batches, row=1, col=2)
    fig.update_yaxes(title="speedup (×, modeled)", rangemode="tozero", row=1, col=2)
    return apply(fig, None, slide=slide, height=400)


def whatif_figure(speedups: dict[str, dict[str, float]], slide: bool = False) -> go.Figure:
    """MODEL: the same measured A on different devices; speedups[device][method]."""
    devices = list(speedups)
    names = list(dict.fromkeys(n for v in speedups.values() for n in v))
    fig = go.Figure(
        [
            go.Bar(
                x=devices,
                y=[speedups[d].get(n) for d in devices],
                name=n,
                marker_color=method_color(n),
                texttemplate="%{y:.2f}×",
                textposition="outside",
            )
            for n in names
        ]
    )
    fig.add_hline(y=1, line_dash="dot", line_color="#6b7280")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title="speedup (×, modeled)", rangemode="tozero")
    return apply(fig, "MODEL: what the measured A would give on other hardware (roofline)", slide=slide, height=380)
