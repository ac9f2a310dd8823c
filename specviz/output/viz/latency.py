"""The latency curve: why verifying k tokens costs barely more than producing one."""

from __future__ import annotations

import math
import textwrap

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.core.measure import Provenance
from specviz.output.viz.theme import VERIFY, apply
from specviz.tuning.probe import LatencyCurve
from specviz.tuning.roofline import Roof

FLOOR, CEILING, FREE = "#0f766e", "#b45309", "rgba(15,118,110,0.10)"


def latency_figure(
    curve: LatencyCurve, slide: bool = False, here: Provenance | None = None, roof: Roof | None = None
) -> go.Figure:
    """Forward latency (ms) and cost relative to one token, against new tokens per pass; with `roof`, this
    device's measured roofline beneath: the memory floor, the compute ceiling and the flat stretch up to the knee.

    The subtitle says where and when the curve was measured (`here` is the current machine, so "this
    machine" appears only when it is) and warns when the measurement was disturbed.
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    rel = curve.relative()
    if roof is not None:
        _add_roof(fig, roof, max(curve.ms), _reaches(curve.ks, rel, 1.5))
    _add_curves(fig, curve, rel)
    k16 = curve.ks.index(16) if 16 in curve.ks else len(curve.ks) // 2
    # annotations on a log axis take log10 of the data coordinate; the label sits in the empty upper left
    # (above the "if cost grew with k" diagonal), in data coordinates so it stays there at every size
    fig.add_annotation(
        x=math.log10(curve.ks[k16]),
        y=curve.ms[k16],
        text=f"{curve.ks[k16]} tokens cost {rel[k16]:.2f}× one",
        showarrow=True,
        arrowhead=2,
        axref="x",
        ayref="y",
        ax=math.log10(curve.ks[min(1, len(curve.ks) - 1)]),
        ay=0.9 * max(curve.ms),
        xanchor="center",
        bgcolor="rgba(255,255,255,0.85)",
    )
    _style_axes(fig, curve.ks, rel)
    # from zero: a disturbed curve's error bars would otherwise pull the axis below it
    top = max(m + sp / 2 for m, sp in zip(curve.ms, curve.spread_ms))
    fig.update_yaxes(range=[0, 1.1 * max(top, roof.floor_ms if roof else 0.0)], secondary_y=False)
    # the home page draws it in a narrow column: the subtitle's lines are kept short
    lines = [curve.device, *textwrap.wrap(curve.measured(here), 60)]
    lines += textwrap.wrap(f"disturbed: {curve.contended}", 60) if curve.contended else []
    title = f"Cost of one forward pass<br><sup>{'<br>'.join(lines)}</sup>"
    return apply(fig, title, slide=slide, height=460)


def _reaches(ks: list[int], rel: list[float], times: float) -> float | None:
    """The tokens at which the measured cost first reaches `times` one token's (interpolated); None if it never does."""
    for i in range(1, len(ks)):
        if rel[i] >= times:
            return ks[i - 1] + (times - rel[i - 1]) / (rel[i] - rel[i - 1]) * (ks[i] - ks[i - 1])
    return None


def _add_roof(fig: go.Figure, roof: Roof, top_ms: float, measured: float | None = None) -> None:
    """The floor (weights read once), the ceiling (2·params·k FLOPs) and, shaded, the stretch below the model's
    knee, named as the model's beside where the measured curve reaches 1.5× one token's cost."""
    ks, lo = roof.ks, roof.ks[0]
    knee = min(max(roof.knee, lo), ks[-1])
    if roof.knee > lo:  # the flat stretch, as a filled trace (data coordinates on the log axis)
        fig.add_scatter(
            x=[lo, knee, knee, lo],
            y=[0, 0, 1.15 * top_ms, 1.15 * top_ms],
            fill="toself",
            fillcolor=FREE,
            line={"width": 0},
            mode="lines",
            name=f"the roofline model's flat stretch: to ~{roof.knee:.0f} token{'' if round(roof.knee) == 1 else 's'}"
            + (f" (measured: 1.5× one at ~{measured:.0f})" if measured else " (measured: under 1.5× throughout)"),
            hoverinfo="skip",
        )
    fig.add_scatter(
        x=[lo, ks[-1]],
        y=[roof.floor_ms] * 2,
        mode="lines",
        name=f"memory floor ({roof.label}): weights / read bandwidth",
        line={"color": FLOOR, "dash": "dash", "width": 2},
        hovertemplate=f"floor {roof.floor_ms:.1f} ms<extra></extra>",
    )
    slope = roof.ceiling_ms[0] / lo  # ms per token
    end = min(ks[-1], 1.15 * max(top_ms, roof.floor_ms) / slope)  # where the line leaves the plot, if it does
    xs = [k for k in ks if k < end] + [end]
    if len(xs) > 1:
        fig.add_scatter(
            x=xs,
            y=[slope * k for k in xs],
            mode="lines",
            name="compute ceiling: 2·params·k / matmul peak",
            line={"color": CEILING, "dash": "dash", "width": 2},
            hovertemplate="k=%{x}: %{y:.1f} ms of arithmetic<extra></extra>",
        )


def _add_curves(fig: go.Figure, curve: LatencyCurve, rel: list[float]) -> None:
    """The measured latency (left axis) and, on the right, its cost relative to k = 1 against linear growth."""
    fig.add_scatter(
        x=curve.ks,
        y=curve.ms,
        mode="lines+markers",
        name="latency (ms)",
        line={"color": VERIFY, "width": 3},
        marker={"size": 9},
        error_y={"type": "data", "array": [s / 2 for s in curve.spread_ms], "visible": True, "thickness": 1},
        hovertemplate="k=%{x}: %{y:.1f} ms<extra></extra>",
    )
    fig.add_scatter(
        x=curve.ks,
        y=[float(k) for k in curve.ks],
        mode="lines",
        name="if cost grew with k",
        line={"color": "#9ca3af", "dash": "dot"},
        secondary_y=True,
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=curve.ks,
        y=rel,
        mode="lines+markers",
        name="cost relative to k = 1",
        line={"color": "#334155", "width": 2, "dash": "dash"},
        secondary_y=True,
        hovertemplate="k=%{x}: %{y:.2f}× one token<extra></extra>",
    )


def _style_axes(fig: go.Figure, ks: list[int], rel: list[float]) -> None:
    """Log k across; latency from zero on the left, relative cost on a log scale with × ticks on the right."""
    fig.update_xaxes(title="new tokens in one forward pass (k)", type="log", tickvals=ks)
    fig.update_yaxes(title="latency (ms)", rangemode="tozero", secondary_y=False)
    top = max(max(rel), max(ks))
    ticks = [v for v in (1, 2, 4, 8, 16, 32, 64, 128, 256) if v <= 2 * top]
    fig.update_yaxes(
        title="relative cost",
        type="log",
        secondary_y=True,
        showgrid=False,
        tickvals=ticks,
        ticktext=[f"{v}×" for v in ticks],
    )
