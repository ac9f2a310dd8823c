"""The Lineage page: the works and what each changed, with the stored Spec-Bench numbers of those that run here."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.output.pages.page import Figure, Page, Shown


def works(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
    """The works on their timeline, with the stored bench's numbers ({"bench", "where"}; none: described only)."""
    from specviz.output.viz.lineage import lineage_figure

    return lineage_figure(inputs.get("bench"), inputs.get("where", ""))


FIGURES = (Figure("lineage", works, "lineage", wide=True),)
PAGE = Page("lineage", "Lineage", figures=FIGURES, icon=":material/history_edu:")
