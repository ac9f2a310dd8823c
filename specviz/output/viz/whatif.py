"""A roofline what-if, labelled a model: a forward's cost against the tokens it carries, relative to one token,
for the machines a curve was measured on (the recording's CPU, a stored GPU probe) and for a 7B model on GPUs
(published peaks), and where each knee sits. Every number in its legend is read from the lines it draws."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from specviz.output.viz.theme import ACCENT, apply

KS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
# the measured curves: the app's own colour for the recording's, the stored badge's rust for the stored GPU probe;
# the modelled GPUs in slate, dark and light (the role hues, proposed and target, keep their one meaning)
MEASURED_COLORS, MODEL_COLORS = (ACCENT, "#9a3412"), ("#0f172a", "#64748b")


@dataclass(frozen=True)
class Line:
    """One device's cost against the tokens a forward carries: measured (`ks`, `rel`: each forward over the
    one-token forward) or a model's max(1, k / knee); `flat`: the tokens where it first costs the figure's `at`×
    one token (None: not within the tokens measured)."""

    name: str
    ks: tuple[float, ...] = ()
    rel: tuple[float, ...] = ()
    flat: float | None = None
    knee: float = 0.0
    day: str = ""  # a stored measurement's day, said in its legend


def legend(line: Line, at: float) -> str:
    """The line's legend entry, its numbers read from the line: where it reaches `at`× one token, or, measured and
    never reaching it, its cost at the most tokens measured."""
    said = ("measured " + line.day).strip() if line.ks else "a model"
    if line.flat is not None:
        return f"{line.name}, {said}: {at:g}× at ≈ {line.flat:.0f} tokens"
    return f"{line.name}, {said}: {line.rel[-1]:.2f}× at {line.ks[-1]:.0f} tokens, under {at:g}× throughout"


def whatif_figure(lines: Sequence[Line], at: float, title: str) -> go.Figure:
    """The measured curves (lines and markers) and the models (lines); a dotted line marks, for each that reaches
    it, the tokens one pass carries before it costs `at`× one token (the flat stretch's end)."""
    fig = go.Figure()
    measured = iter(MEASURED_COLORS)
    modelled = iter(MODEL_COLORS)
    for line in lines:
        color = next(measured) if line.ks else next(modelled)
        x = list(line.ks) if line.ks else KS
        y = list(line.rel) if line.ks else [max(1.0, k / line.knee) for k in KS]
        mode = "lines+markers" if line.ks else "lines"
        fig.add_scatter(x=x, y=y, mode=mode, line={"color": color, "width": 3}, name=legend(line, at),
                        marker={"size": 10})  # fmt: skip
        if line.flat is not None:
            fig.add_vline(x=line.flat, line={"color": color, "dash": "dot", "width": 2})
    fig.update_xaxes(type="log", title="tokens in one forward pass", tickvals=KS)
    fig.update_yaxes(type="log", title="cost relative to one token", tickvals=[1, 1.25, at, 2, 3],
                     range=[-0.02, 0.58])  # fmt: skip
    return apply(fig, title, height=440)
