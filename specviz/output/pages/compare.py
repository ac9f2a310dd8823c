"""The Compare methods page: the methods side by side on one prompt, and stored benches across kinds, batch, context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.output.pages.page import REPEATS, Builder, Control, Figure, Page, Shown, given
from specviz.output.viz.categories import wins_figure
from specviz.output.viz.compare import batch_figure, length_figure, whatif_figure
from specviz.output.viz.scaling import curve_figure, region_figure

# on by default: the fastest in the stored benches of 2-core CPUs (docs/bench: prompt lookup, EAGLE-2, and the
# hybrid of the two), and Medusa; speculative sampling's untrained draft and Jacobi lose, and a first visit would
# read only that
ON = ("pld", "medusa", "eagle", "hybrid")
CONTROLS = (
    *(Control(f"compare.on.{n}", "bool") for n in methods.MODULES if n != "ar"),
    Control("compare.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    on = [n for n in methods.available() if n != "ar" and values.get(f"compare.on.{n}", n in ON)]
    return {n: methods.make_config(n) for n in on}, None


def summarized(figure: str) -> Builder:
    """viz.compare's `figure` of the methods' rows (tuning.compare.summarize: a run each, or lists of
    interleaved repeats: their median with its range)."""

    def draw(traces: dict[str, Any], _shown: Shown) -> go.Figure:
        from specviz.output.viz import compare
        from specviz.tuning.compare import summarize

        return getattr(compare, figure)(summarize(traces))

    return draw


def histogram(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import accepted_histogram

    return accepted_histogram(traces)


def acceptance_rate(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    from specviz.output.viz.compare import acceptance_rate_figure

    return acceptance_rate_figure(traces)


def step_split(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    """Each method's step split into drafting, the target's pass and the rest, against plain decoding's step."""
    from specviz.output.viz.why import split_figure

    return split_figure(traces, {n: "plain decoding" if n == "ar" else methods.card(n).label for n in traces})


def size_curve(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    """The fit's predicted speedup against tree size on the runs' device, with their measured A / r."""
    from specviz.output.viz.why import live_size

    return live_size(traces)


FIGURES = (
    Figure("speedup", summarized("speedup_figure")),
    Figure("step_split", step_split),
    # the fit's predicted speedup against tree size, the fitted and the paper's size, the run measured: a lesson
    # build drawn when recorded (output/lesson/stored.py) from the fit the recording ran at
    Figure("size_curve", size_curve, lesson_only=True, regrown=True),
    Figure("a_and_r", summarized("a_r_figure")),
    Figure("accepted_histogram", histogram),
    Figure("acceptance_rate", acceptance_rate),
    Figure("throughput", summarized("throughput_figure")),
    # stored or measured on the page's button: the prompt-kinds bench ({"bench", "where", "labels"}), a prompt
    # set's bench, the length sweep, the batched sweeps' points, the latency surface, the what-if's model
    Figure(
        "where_methods_win",
        given(wins_figure, "bench", "where=where", "labels=labels"),
        "stored",
    ),
    Figure("speedup_by_category", given(wins_figure, "bench", "where=where"), "stored"),
    Figure("speedup_vs_length", given(length_figure, "points"), "stored"),
    Figure(
        "speedup_vs_batch",
        given(curve_figure, "points", axis="batch", fixed={"context": None}),
        "stored",
    ),
    Figure(
        "speedup_vs_context",
        given(curve_figure, "points", axis="context", fixed={"batch": 1}),
        "stored",
    ),
    Figure("speculation_region", given(region_figure, "points"), "stored"),
    Figure("batch_surface", given(batch_figure, "surface", "modeled"), "latency"),
    Figure("hardware_whatif", given(whatif_figure, "speedups"), "computed"),
)
PAGE = Page("compare", "Compare methods", CONTROLS, runs, FIGURES, icon=":material/leaderboard:")
