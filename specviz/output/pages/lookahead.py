"""The Lookahead & Jacobi page: a Jacobi window harvests n-grams, a verification branch checks them, one pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import LookaheadDetail
from specviz.core.trace import Trace
from specviz.methods.jacobi import INIT_SOURCES
from specviz.output.pages.page import REPEATS, Control, Figure, Page, Shown, focus, own, per_step, shape
from specviz.output.viz.jacobi import gallery as jacobi_gallery
from specviz.output.viz.lookahead import gallery as lookahead_gallery
from specviz.tuning import presets

PASSES = 8  # where the page's Jacobi pass slider starts
CONTROLS = (
    Control("lookahead.preset", "choice", options=tuple(p.key for p in presets.presets("lookahead"))),
    Control("lookahead.window", "int", 1, 12, field="window"),
    Control("lookahead.ngram", "int", 2, 6, field="ngram"),
    Control("lookahead.guesses", "int", 0, 8, field="guesses"),
    Control("lookahead.init", "choice", options=INIT_SOURCES, field="init"),
    Control("lookahead.seed_prompt", "bool", field="seed_prompt"),
    Control("lookahead.jacobi_guesses", "int", 1, 16, field="guesses", method="jacobi"),
    Control("lookahead.jacobi_init", "choice", options=INIT_SOURCES, field="init", method="jacobi"),
    Control("lookahead.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    """Jacobi for its grid (the pad token as its first guesses unless set), else Lookahead at the page's shape."""
    if figure == "jacobi_grid":
        return {"jacobi": methods.get("jacobi").Config(**({"init": "pad"} | own(values, CONTROLS, "jacobi")))}, None
    fields = shape("lookahead", "lookahead", values) | own(values, CONTROLS)
    return {"lookahead": methods.get("lookahead").Config(**fields)}, None


def grid(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """The Jacobi iteration's passes up to the page's pass slider (`shown.index`: its position; else PASSES)."""
    from specviz.output.viz.jacobi import jacobi_grid_figure

    jac = traces["jacobi"]
    rows = [s.index for s in jac.drafted_steps]
    upto = rows[min(PASSES if shown.index is None else shown.index, len(rows) - 1)] if rows else None
    return jacobi_grid_figure(jac, upto=upto, title=f"Jacobi convergence: A = {jac.mean_accepted:.2f} tokens per pass")


def window(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.lookahead import window_figure

    step = focus(traces["lookahead"], shown)
    title = f"Step {step.index}: the Jacobi window and the n-grams it harvests"
    return window_figure(step.detail_as(LookaheadDetail), title=title)


def verify(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.lookahead import verify_figure

    step = focus(traces["lookahead"], shown)
    return verify_figure(step.detail_as(LookaheadDetail), title=f"Verification branch: root {step.texts[0]!r}")


def mask(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.lookahead import mask_figure

    d = focus(traces["lookahead"], shown).detail_as(LookaheadDetail)
    return mask_figure(d.layout, title="One forward, two branches: the attention mask")


def pool(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.lookahead import final_pool, pool_figure

    pool = final_pool(traces["lookahead"])
    if not pool:
        raise IndexError("the run left no n-gram in its pool")
    return pool_figure(pool, title="The n-gram pool at the end: largest keys and hits")


def sweep(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
    """The stored window sweep ({"sweep", "where": where and when it was measured})."""
    from specviz.output.viz.lookahead import sweep_figure

    return sweep_figure(inputs["sweep"], title=f"Where a wider window stops paying ({inputs['where']})")


def origins(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.lookahead import origins_figure

    return origins_figure([traces["lookahead"]])


FIGURES = (
    Figure("lookahead_window", window, method="lookahead", one_step=True),
    Figure("lookahead_verify", verify, method="lookahead", one_step=True),
    Figure("lookahead_mask", mask, method="lookahead", one_step=True),
    Figure("lookahead_steps", per_step("lookahead"), method="lookahead"),
    Figure("jacobi_grid", grid, method="jacobi"),
    Figure("lookahead_pool", pool, method="lookahead"),
    Figure("lookahead_sweep", sweep, "stored"),
    # a build re-run when recorded (output/lesson/stored.regrown): beside the run shown, one with a seeded pool
    Figure("lookahead_origins", origins, method="lookahead", regrown=True),
)
# each method's own figures, for export
VIEWS = {"lookahead": lookahead_gallery, "jacobi": jacobi_gallery}
PAGE = Page(
    "lookahead",
    "Lookahead & Jacobi",
    CONTROLS,
    runs,
    FIGURES,
    icon=":material/grid_on:",
    method="lookahead",
    views=VIEWS,
)
