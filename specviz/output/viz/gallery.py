"""Every figure a set of traces can draw, by name: what `export` writes and the browser test checks; the
cross-method ones as the pages declare them, each method's own from its card."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import LookaheadDetail
from specviz.core.trace import Trace


def lookahead_views(trace: Trace) -> dict[str, go.Figure]:
    """The window, verification branch and mask of the step that accepted most, and the final pool."""
    from specviz.output.viz.lookahead import final_pool, mask_figure, pool_figure, verify_figure, window_figure

    work = trace.detailed(LookaheadDetail)
    if not work:
        return {}
    best, detail = max(work, key=lambda sd: sd[0].accepted)
    out = {
        "window": window_figure(detail, title=f"Step {best.index}: the Jacobi window"),
        "verify": verify_figure(detail, title=f"Step {best.index}: the verification branch"),
        "mask": mask_figure(detail.layout, title="One forward, two branches: the attention mask"),
    }
    if pool := final_pool(trace):
        out["pool"] = pool_figure(pool, title="The n-gram pool at the end")
    return out


def jacobi_views(trace: Trace) -> dict[str, go.Figure]:
    """The Jacobi convergence grid."""
    from specviz.output.viz.jacobi import jacobi_grid_figure

    return {"grid": jacobi_grid_figure(trace, title="Jacobi iteration: guesses converging")}


def _views(method: str) -> Callable[[Trace], dict[str, go.Figure]] | None:
    """The function drawing one trace's own views, as the method's card names it (None: the timeline only)."""
    target = methods.card(method).figures if method in methods.available() else ""
    if not target:
        return None
    module, _, func = target.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError):
        return None  # that method's views are not in this checkout


def figures(traces: dict[str, Trace]) -> dict[str, go.Figure]:
    """The cross-method figures, drawn by the Timeline's and Compare's declared builders (output/pages/), under
    the names export writes, plus each method's own views (its card's gallery)."""
    from specviz.output.pages import PAGES

    timeline, compare = PAGES["timeline"], PAGES["compare"]
    out = {"timeline": timeline.draw("timeline_at", traces)}
    out["tokens_over_time"] = timeline.draw("tokens_over_time", traces)
    if "ar" in traces and len(traces) > 1:
        out |= {n: compare.draw(n, traces) for n in ("speedup", "a_and_r", "accepted_histogram", "acceptance_rate")}
    for name, trace in traces.items():
        views = _views(name)
        if views is not None:
            out |= {f"{name}_{k}": fig for k, fig in views(trace).items()}
    return out
