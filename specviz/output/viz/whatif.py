"""A roofline what-if, labelled a model: a forward's cost against the tokens it carries, relative to one token,
for the machine a curve was measured on and for a 7B model on GPUs (published peaks), and where each knee sits."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from specviz.output.viz.theme import ACCENT, apply

KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def whatif_figure(
    ks: Sequence[float], ms: Sequence[float], knees: dict[str, float], flats: dict[str, float], labels: dict[str, str]
) -> go.Figure:
    """The measured curve (the first of `flats`, named by `labels`), and per GPU the model max(1, k / knee); a
    dotted line marks, for each, the tokens one pass carries before it costs 1.5× one token (the flat stretch's end)."""
    fig = go.Figure()
    cpu = next(iter(flats))
    fig.add_scatter(
        x=list(ks),
        y=[m / ms[0] for m in ms],
        mode="lines+markers",
        line={"color": ACCENT, "width": 3},
        name=f"{labels[cpu]}, measured: 1.5× at ≈ {flats[cpu]:.0f} tokens",
        marker={"size": 10},
    )
    fig.add_vline(x=flats[cpu], line={"color": ACCENT, "dash": "dot", "width": 2})
    # the GPUs in slate, dark and light: the role hues (target, proposed) keep their one meaning
    for color, (name, k) in zip(["#0f172a", "#64748b"], knees.items(), strict=False):
        fig.add_scatter(
            x=KS,
            y=[max(1.0, x / k) for x in KS],
            mode="lines",
            line={"color": color, "width": 3},
            name=f"{labels.get(name, name)}, a model: 1.5× at ≈ {flats[name]:.0f} tokens",
        )
        fig.add_vline(x=flats[name], line={"color": color, "dash": "dot", "width": 2})
    fig.update_xaxes(type="log", title="tokens in one forward pass", tickvals=KS)
    fig.update_yaxes(type="log", title="cost relative to one token", tickvals=[1, 1.5, 2, 3, 4], range=[-0.02, 0.62])
    title = (
        f"Where the knee sits: {labels[cpu]} measured, 7B on GPUs modelled<br><sup>A MODEL for the GPUs: max(read the "
        "weights once, 2·params FLOPs per token at the bf16 peak), from published peaks; not a measurement</sup>"
    )
    return apply(fig, title, height=440)
