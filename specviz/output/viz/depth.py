"""Medusa against Hydra: accuracy and acceptance by depth, and the two trees of the same step, from traces.

Everything here is computed from stored data: the heads' held-out calibration tables and the decoding traces.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import MedusaDetail
from specviz.core.trace import StepTrace, Trace
from specviz.output.viz.theme import apply, method_color


def acceptance_by_depth(trace: Trace, depths: int) -> list[float]:
    """P(the step accepted at least d drafted tokens), d = 1..depths, over the trace's tree steps."""
    steps = [st for st, _ in trace.detailed(MedusaDetail)]
    if not steps:
        return [0.0] * depths
    return [round(sum(st.drafts_accepted >= d for st in steps) / len(steps), 4) for d in range(1, depths + 1)]


def step_at(trace: Trace, offset: int) -> StepTrace | None:
    """The tree step that starts at output token `offset` (greedy runs of two methods share their tokens)."""
    at = 0
    for st in trace.steps:
        if at == offset and st.detail is not None:
            return st
        at += st.accepted
    return None


def starts(trace: Trace) -> list[int]:
    """The output offset where each tree step starts."""
    out, at = [], 0
    for st in trace.steps:
        if st.detail is not None:
            out.append(at)
        at += st.accepted
    return out


def depth_figure(
    series: dict[str, Sequence[float]], title: str, ytitle: str, slide: bool = False, prefix: str = "head"
) -> go.Figure:
    """Grouped bars per depth, one colour per method (series keyed by method name), the value on each bar."""
    fig = go.Figure()
    for name, values in series.items():
        depths = [f"{prefix} {d}" for d in range(1, len(values) + 1)]
        fig.add_trace(
            go.Bar(
                x=depths,
                y=list(values),
                name=methods.card(name).label if name in methods.available() else name,
                marker_color=method_color(name.lower()),
                text=[f"{v:.2f}" for v in values],
                textposition="outside",
                hovertemplate=f"{name} %{{x}}: %{{y:.3f}}<extra></extra>",
            )
        )
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(title=ytitle, range=[0, 1.08], tickformat=".0%")
    return apply(fig, title, slide, height=360)
