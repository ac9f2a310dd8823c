"""Per-step views of any trace: its tokens coloured by the step that committed them, and tokens per step
with the running speedup over plain decoding."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.core.measure import running_speedup
from specviz.core.trace import Trace
from specviz.output.viz.theme import VERIFY, add_speedup, apply, method_color, token_text

STEP_COLORS = ["#c4b5fd", "#a5f3fc", "#fde68a", "#bbf7d0", "#fecaca", "#ddd6fe", "#bfdbfe", "#fed7aa"]


def token_squares(xs: list, ys: list, texts: list[str], color: Any, size: int, font: int, **more: Any) -> go.Scatter:
    """Tokens drawn as squares of `size` px in `color` (one, or one per token), each its text inside: the token
    strip's and the Jacobi grid's cells."""
    marker = {"symbol": "square", "size": size, "color": color}
    return go.Scatter(x=xs, y=ys, mode="markers+text", text=texts, textfont={"size": font}, marker=marker, **more)


def token_strip(trace: Trace, upto: int | None = None, per_line: int = 16, slide: bool = False) -> go.Figure:
    """The output tokens, each boxed in the colour of the step (forward pass) that committed it."""
    fig = go.Figure()
    col = row = 0
    xs, ys, texts, hovers, colors = [], [], [], [], []
    for st in trace.steps if upto is None else trace.steps[: upto + 1]:
        for j, text in enumerate(st.texts):
            if col == per_line or (text.startswith("\n") and col):
                col, row = 0, row + 1
            xs.append(col)
            ys.append(-row)
            texts.append(token_text(text, 8))
            hovers.append(f"step {st.index}, token {j + 1} of {st.accepted}")
            colors.append(STEP_COLORS[st.index % len(STEP_COLORS)])
            col += 1
    fig.add_trace(
        token_squares(xs, ys, texts, colors, 44 if slide else 34, 14 if slide else 11, hovertext=hovers).update(
            hoverinfo="text", showlegend=False
        )
    )
    fig.update_xaxes(visible=False, range=[-0.6, per_line - 0.4])
    fig.update_yaxes(visible=False, range=[-row - 0.6, 0.6])
    return apply(fig, "Tokens coloured by the step that produced them", slide, height=90 + 40 * (row + 1))


def steps_figure(
    trace: Trace,
    baseline: Trace | None,
    slide: bool = False,
    upto: int | None = None,
    title: str = "Tokens per step and the running speedup",
    current: int | None = None,
) -> go.Figure:
    """Per step: tokens committed (A) as bars in the method's colour, and the running speedup over plain
    decoding on the same prompt (`measure.running_speedup`, ending at `measure.speedup`); steps 0…upto only.
    `current` marks the step a page is showing: its bar solid and outlined, the others paler."""
    steps = trace.steps[: None if upto is None else upto + 1]
    idx = [st.index for st in steps]
    marker: dict = {"color": method_color(trace.method)}
    if current is not None:
        marker |= {
            "opacity": [1.0 if i == current else 0.45 for i in idx],
            "line": {"color": ["#111827" if i == current else "rgba(0,0,0,0)" for i in idx], "width": 2},
        }
    fig = go.Figure(go.Bar(x=idx, y=[st.accepted for st in steps], name="tokens this step (A)", marker=marker))
    if current is not None and current in idx:
        fig.add_annotation(
            x=current, y=steps[idx.index(current)].accepted, text=f"step {current}", yshift=12, showarrow=False
        )
    if baseline is not None:
        speed = [round(x, 3) for x in running_speedup(baseline, trace, upto)]
        add_speedup(fig, idx, speed, "running speedup vs AR", VERIFY)
    # at least ten steps' room, so the first few steps are bars, not one bar stretched across the axis
    lo = idx[0] if idx else 0
    fig.update_xaxes(title="step (one target forward pass)", range=[lo - 0.5, max(idx[-1] if idx else 0, lo + 9) + 0.5])
    fig.update_layout(yaxis={"title": "tokens committed", "rangemode": "tozero"})  # y2 keeps its own title
    return apply(fig, title, slide, height=340)
