"""The home page: why parallel decoding (a forward pass costs about the same for one token and for many)."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.trace import Trace
from specviz.output.pages.page import Figure, Page, Shown, given
from specviz.output.viz.latency import latency_figure


def serial(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    """Plain decoding's run on one clock: one forward pass a token."""
    from specviz.output.viz.timeline import timeline_figure

    return timeline_figure([traces["ar"]], title="Serial: one forward pass per token")


# this device's cost curve over its roofline ({"curve": tuning.probe's, "here": its provenance, "roof"})
LATENCY = given(latency_figure, "curve", "here=here", "roof=roof")

FIGURES = (
    Figure("home_timeline", serial, method="ar"),
    Figure("latency_curve", LATENCY, source="latency"),
    Figure("gpu_whatif", source="computed", lesson_only=True),
    Figure("published_figures", source="computed", lesson_only=True),  # the papers' numbers, copied
)
PAGE = Page("home", "Why parallel decoding", figures=FIGURES, icon=":material/home:")
