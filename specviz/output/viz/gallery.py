"""Every figure a set of traces can draw, by name: what `export` writes and the browser test checks; the
cross-method ones as the pages declare them, each method's own as the page teaching it registers them."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go

from specviz.core.trace import Trace


def views(method: str) -> Callable[[Trace], dict[str, go.Figure]] | None:
    """The function drawing one of `method`'s traces' own views, as the page teaching it registers them (None: the
    timeline only)."""
    from specviz.output.pages import PAGES

    return next((p.views[method] for p in PAGES.values() if method in p.views), None)


def figures(traces: dict[str, Trace]) -> dict[str, go.Figure]:
    """The cross-method figures, drawn by the Timeline's and Compare's declared builders (output/pages/), under
    the names export writes, plus each method's own views (as its page registers them)."""
    from specviz.output.pages import PAGES

    timeline, compare = PAGES["timeline"], PAGES["compare"]
    out = {"timeline": timeline.draw("timeline_at", traces)}
    out["tokens_over_time"] = timeline.draw("tokens_over_time", traces)
    if "ar" in traces and len(traces) > 1:
        out |= {n: compare.draw(n, traces) for n in ("speedup", "a_and_r", "accepted_histogram", "acceptance_rate")}
    for name, trace in traces.items():
        if (own := views(name)) is not None:
            out |= {f"{name}_{k}": fig for k, fig in own(trace).items()}
    return out
