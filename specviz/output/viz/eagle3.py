"""EAGLE-3 beside EAGLE-2: which of the target's layers each head reads, drawn from a step's trace record."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import Eagle3Detail
from specviz.core.trace import StepTrace
from specviz.output.viz.theme import NEUTRAL, apply, method_color


def _box(fig: go.Figure, x0: float, x1: float, y0: float, y1: float, text: str, color: str) -> None:
    fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": color, "width": 2}, fillcolor="white")
    fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False)  # the figure's own type


def _arrow(fig: go.Figure, x0: float, y0: float, x1: float, y1: float, color: str) -> None:
    fig.add_annotation(
        x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
        arrowhead=3, arrowwidth=2, arrowcolor=color, text="",
    )  # fmt: skip


STACK, FUSE = 1.75, 2.75  # x of the target's layer stack (its labels to its left) and of the fusion's box


def fusion_figure(step: StepTrace, n_layers: int, slide: bool = False) -> go.Figure:
    """The target's layer stack, the three layers whose inputs EAGLE-3 fuses (with this step's RMS and peak
    of each, from the trace), and EAGLE-2's single input, the final hidden state, for comparison."""
    d = step.detail_as(Eagle3Detail)
    rms, peak = d.features.get("layer_rms", []), d.features.get("layer_peak", [])
    e3, e2 = method_color("eagle3"), method_color("eagle")
    fig = go.Figure()
    read = {layer: i for i, layer in enumerate(d.layers)}
    ys = [i / n_layers for i in range(n_layers + 1)]
    colors = [e3 if i in read else NEUTRAL for i in range(n_layers)]
    fig.add_trace(
        go.Bar(
            x=[STACK] * n_layers, y=[1 / n_layers * 0.8] * n_layers, base=ys[:-1], marker_color=colors,
            orientation="v", width=0.35, hovertext=[f"decoder layer {i}" for i in range(n_layers)],
            hoverinfo="text", showlegend=False,
        )
    )  # fmt: skip
    for layer, i in read.items():
        y = ys[layer] + 0.4 / n_layers
        stats = f"<br>RMS {rms[i]:.1f} · peak {peak[i]:.0f}" if i < len(rms) and i < len(peak) else ""
        # left of the stack, its arrow leaving to the right: no arrow crosses a label
        fig.add_annotation(x=STACK - 0.25, y=y, text=f"input of layer {layer}{stats}", showarrow=False,
                           xanchor="right", yanchor="middle", align="right")  # fmt: skip
        _arrow(fig, STACK + 0.2, y, FUSE - 0.05, 0.5, e3)
    _box(fig, FUSE, FUSE + 1.35, 0.38, 0.62, "RMSNorm each<br>Linear(3h → h)<br>= g", e3)
    _box(fig, FUSE, FUSE + 1.35, 0.05, 0.22, "embed(x_t+1)", NEUTRAL)
    _box(fig, 4.3, 5.75, 0.24, 0.76, "fc([e, g])<br>→ 1 decoder layer<br>→ norm<br>→ LM head<br>→ next tokens", e3)
    _arrow(fig, FUSE + 1.35, 0.5, 4.3, 0.5, e3)
    _arrow(fig, FUSE + 1.35, 0.14, 4.3, 0.32, NEUTRAL)
    fig.add_annotation(x=STACK + 0.3, y=1.13, text="final hidden state: EAGLE-2's only input", showarrow=False,
                       xanchor="left", font={"color": e2})  # fmt: skip  # above the top layer's arrow
    _arrow(fig, STACK + 0.25, 1.13, STACK + 0.02, 1.0, e2)
    fig.update_xaxes(visible=False, range=[0, 5.8])
    fig.update_yaxes(visible=False, range=[-0.1, 1.18])
    title = f"What the head consumes: EAGLE-3 reads layers {', '.join(map(str, d.layers))} of {n_layers}"
    return apply(fig, title, slide, height=380)
