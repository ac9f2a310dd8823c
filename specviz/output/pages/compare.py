"""The Compare methods page: the methods side by side on one prompt, and stored benches across kinds, batch, context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.output.pages.page import REPEATS, Control, Figure, Page, Shown

# on by default: the fastest measured on a 2-core CPU (docs/bench: prompt lookup, EAGLE-2, and the hybrid of the
# two), and Medusa; speculative sampling's untrained draft and Jacobi lose, and a first visit would read only that
ON = ("pld", "medusa", "eagle", "hybrid")
CONTROLS = (
    *(Control(f"compare.on.{n}", "bool") for n in methods.MODULES if n != "ar"),
    Control("compare.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    on = [n for n in methods.available() if n != "ar" and values.get(f"compare.on.{n}", n in ON)]
    return {n: methods.make_config(n) for n in on}, None


def speedup(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    """Each method's speedup over plain decoding (a run each, or lists of interleaved repeats: their median)."""
    from specviz.output.viz.compare import speedup_figure
    from specviz.tuning.compare import summarize

    return speedup_figure(summarize(traces))


def a_and_r(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import a_r_figure
    from specviz.tuning.compare import summarize

    return a_r_figure(summarize(traces))


def histogram(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import accepted_histogram

    return accepted_histogram(traces)


def acceptance_rate(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import acceptance_rate_figure

    return acceptance_rate_figure(traces)


PAGE = Page(
    "compare",
    "views/compare.py",
    "Compare methods",
    CONTROLS,
    runs,
    (
        Figure("speedup", speedup),
        Figure("a_and_r", a_and_r),
        Figure("accepted_histogram", histogram),
        Figure("acceptance_rate", acceptance_rate),
        Figure("where_methods_win", source="stored"),  # the prompt-kinds bench
        Figure("speedup_vs_batch", source="stored"),  # the batched sweep
        Figure("speedup_vs_context", source="stored"),
    ),
)
