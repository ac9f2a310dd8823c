"""The Compare methods page: the methods side by side on one prompt, and stored benches across kinds, batch, context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.trace import Trace
from specviz.output.pages.page import REPEATS, Control, Figure, Page, Shown

ON = ("medusa", "eagle", "lookahead")  # the toggles on by default
CONTROLS = (
    *(Control(f"compare.on.{n}", "bool") for n in methods.MODULES if n != "ar"),
    Control("compare.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    on = [n for n in methods.available() if n != "ar" and values.get(f"compare.on.{n}", n in ON)]
    return {n: methods.make_config(n) for n in on}, None


def speedup(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import speedup_figure
    from specviz.tuning.compare import summarize

    return speedup_figure(summarize(traces))


def a_and_r(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import a_r_figure
    from specviz.tuning.compare import summarize

    return a_r_figure(summarize(traces))


PAGE = Page(
    "compare",
    "views/compare.py",
    "Compare methods",
    CONTROLS,
    runs,
    (
        Figure("speedup", speedup),
        Figure("a_and_r", a_and_r),
        Figure("where_methods_win", source="stored"),  # the prompt-kinds bench
        Figure("speedup_vs_batch", source="stored"),  # the batched sweep
        Figure("speedup_vs_context", source="stored"),
    ),
)
