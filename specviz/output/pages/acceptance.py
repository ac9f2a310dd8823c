"""The Acceptance decisions page: speculative sampling's draft judged token by token, typical acceptance, the lab."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.acceptance import RULES
from specviz.core.trace import StepTrace, Trace
from specviz.output.pages.page import Control, Figure, Page, Shown, focus, given, own
from specviz.output.viz.acceptance import gallery as acceptance_gallery
from specviz.output.viz.acceptance import lab_figure
from specviz.tuning.lossless import DRAFTS

METHOD = "sps"  # speculative sampling, whose chain the page judges
CONTROLS = (
    Control("acceptance.rule", "choice", options=RULES, field="rule"),
    Control("acceptance.temperature", "float", 0.0, 2.0),
    Control("acceptance.gamma", "int", 1, 8, field="gamma"),
    Control("acceptance.draft", "choice", options=("layers", "trained"), field="draft"),  # trained: models/draft
    Control("acceptance.depth", "int", 1, 16),  # the draft's layers: 0 to depth − 1
    Control("acceptance.eps", "float", 0.01, 0.5, field="eps"),
    Control("acceptance.delta", "float", 0.05, 1.0, field="delta"),
    Control("acceptance.samples", "choice", options=(1000, 5000, 20000, 100000)),
    Control("acceptance.lab_draft", "choice", options=DRAFTS),
)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    """Speculative sampling with the page's draft and rule, at its temperature."""
    fields = {"draft": "layers", "rule": "speculative"} | own(values, CONTROLS)
    cfg = methods.get(METHOD).Config(layers=f"0-{values.get('acceptance.depth', 4) - 1}", **fields)
    return {METHOD: cfg}, values.get("acceptance.temperature", 0.8)


def judged(traces: dict[str, Trace], shown: Shown) -> StepTrace:
    """The step in focus among those that judged a draft (IndexError when none did)."""
    from specviz.output.viz.acceptance import records

    trace = traces[METHOD]
    return focus(trace, shown, [s for s in trace.steps if records(s)])


def decisions(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.acceptance import decisions_figure

    return decisions_figure(judged(traces, shown))


def typical(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.acceptance import typical_figure, typical_points

    v = shown.values
    points = typical_points(traces[METHOD])
    return typical_figure(points, v.get("acceptance.eps", 0.09), v.get("acceptance.delta", 0.3))


def residual(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """p, q and the normalised residual at the step's rejection (the record of the rejected draft)."""
    from specviz.output.viz.acceptance import records, rejection_figure

    step = judged(traces, shown)
    rejected = [r for r in records(step) if not r["accepted"] and "dists" in r]
    if not rejected:
        raise IndexError("the step rejected no draft")
    text = rejected[0].get("text", "")
    title = f"Step {step.index}: {text!r} rejected; the next token is drawn from norm(max(0, p − q))"
    return rejection_figure(rejected[0]["dists"], title)


def last_rejected(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """After the step's last judged draft was rejected: p, q and the residual the next token is drawn from."""
    from specviz.output.viz.acceptance import records, rejection_figure

    step = judged(traces, shown)
    last = records(step)[-1]
    if "dists" not in last:
        raise IndexError("the step's last draft was accepted")
    title = f"Step {step.index}: after rejecting {last.get('text', '')!r}, the next token is drawn from"
    return rejection_figure(last["dists"], title=title)


def kv_cache(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """The cache after the step: rows kept, rows rolled back."""
    from specviz.output.viz.kvcache import cells, kv_figure

    trace, step = traces[METHOD], judged(traces, shown)
    after = trace.steps[step.index + 1] if step.index + 1 < len(trace.steps) else step
    return kv_figure(cells(trace, step), after.root_from, step.index)


def gamma_test(traces: dict[str, Any], _shown: Shown) -> go.Figure:
    """The cost model fitted on the page's run at its γ, drawn at every γ (the recording runs the others too)."""
    from specviz.output.viz.gamma import live

    return live(traces)


FIGURES = (
    Figure("acceptance_decisions", decisions, method=METHOD, one_step=True),
    Figure("acceptance_typical", typical, method=METHOD),
    Figure("acceptance_rejection", last_rejected, method=METHOD, one_step=True),
    Figure("acceptance_lab", given(lab_figure, "lab"), "lab", METHOD),
    Figure("sps_residual", residual, method=METHOD, one_step=True, lesson_only=True),
    Figure("kv_cache", kv_cache, method=METHOD, one_step=True, lesson_only=True),
    Figure("sps_exact", source="computed", method=METHOD, lesson_only=True),
    Figure("sps_cost_model", source="computed", method=METHOD, lesson_only=True),
    Figure("what_data_buys", source="computed", lesson_only=True),
    # the cost model fitted at the stop's γ, against runs at other γ made when the lesson is recorded (lesson.gamma)
    Figure("sps_gamma_test", gamma_test, method=METHOD, lesson_only=True, regrown=True),
)
# each chain method's own figures, for export
VIEWS = {"sps": acceptance_gallery, "pld": acceptance_gallery}
PAGE = Page(
    "acceptance", "Acceptance decisions", CONTROLS, runs, FIGURES, icon=":material/rule:", method=METHOD, views=VIEWS
)
