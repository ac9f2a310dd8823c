"""The What data buys page: the heads' learning curves against the positions they trained on, whose text."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.output.pages.page import Figure, Page, Shown, given
from specviz.output.viz.learning import learning_figure


def bought(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
    """EAGLE-2's A on the page's prompt with each shipped head ({"heads", "runs": one run each, in order})."""
    from specviz.output.viz.learning import a_by_head_figure

    return a_by_head_figure(inputs["heads"], [t.mean_accepted for t in inputs["runs"]])


LEARNING = given(learning_figure, "curves", "rows", "depth")

FIGURES = (
    # stored: the learning curves and recorded experiments ({"curves", "rows"}) at the page's "depth"
    Figure("learning_curves", LEARNING, "stored"),
    Figure("a_by_head", bought, method="eagle"),
)
PAGE = Page("data", "What data buys", figures=FIGURES, icon=":material/dataset:")
