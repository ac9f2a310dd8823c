"""The Medusa page: heads guess ahead, a sparse candidate tree verified in one pass; Hydra's heads beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import MedusaDetail
from specviz.core.trace import Trace
from specviz.output.pages.page import (
    REPEATS,
    Beside,
    Control,
    Figure,
    Page,
    Shown,
    focus,
    given,
    own,
    per_step,
    shape,
    strip,
)
from specviz.output.viz.depth import depth_figure
from specviz.output.viz.hybrid import origins_figure
from specviz.output.viz.tree import busiest_tree
from specviz.output.viz.tree import gallery as tree_gallery
from specviz.tuning import presets

ACCURACY = {
    "title": "Held-out top-1 accuracy of each head (Hydra given its branch's true tokens)",
    "ytitle": "top-1 accuracy",
}
CONTROLS = (
    Control("medusa.preset", "choice", options=tuple(p.key for p in presets.presets("medusa"))),
    Control("medusa.total_tokens", "int", 1, 65, field="total_tokens"),
    Control("medusa.acceptance", "choice", options=("exact", "typical"), field="rule"),
    Control("medusa.temperature", "float", 0.0, 1.5),
    Control("medusa.eps", "float", 0.01, 0.5, field="eps"),
    Control("medusa.delta", "float", 0.05, 1.0, field="delta"),
    Control("medusa.hydra", "bool"),  # Hydra beside Medusa
    Control("medusa.lookahead", "bool"),  # Medusa + Lookahead beside Medusa
    Control("medusa.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], _figure: str, _methods: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    """Medusa at the page's settings, and Hydra and Medusa + Lookahead beside it while their toggles are on."""
    cfg = methods.get("medusa").Config(**(shape("medusa", "medusa", values) | own(values, CONTROLS)))
    paired = paired_with_lookahead(cfg, values.get("medusa.lookahead", False))
    return {"medusa": cfg, **hydra(cfg, values.get("medusa.hydra", False)), **paired}, values.get("medusa.temperature")


def paired_with_lookahead(medusa: Any, on: bool) -> dict[str, Any]:
    """Medusa + Lookahead beside Medusa: the same heads, tree and rule, Lookahead's window and pool added."""
    if not on:
        return {}
    fields = {f: getattr(medusa, f) for f in ("heads", "total_tokens", "rule", "eps", "delta", "heads_dir")}
    return {"medusa_lookahead": methods.get("medusa_lookahead").Config(**fields)}


def hydra(medusa: Any, on: bool) -> dict[str, Any]:
    """Hydra beside Medusa, as the page runs it: the same tree, at most as many heads as Hydra trained."""
    if not on:
        return {}
    from specviz.heads import hydra as hydra_heads
    from specviz.heads.medusa import HeadsError

    try:
        k = min(medusa.heads, hydra_heads.read_config(hydra_heads.models_dir()).num_heads)
    except (HeadsError, OSError, ValueError):  # no Hydra heads here: Medusa runs alone, as the page would
        return {}
    fields = {f: getattr(medusa, f) for f in ("total_tokens", "rule", "eps", "delta")}
    return {"hydra": replace(methods.get("hydra").Config(), heads=k, **fields)}


def tree(traces: dict[str, Trace], shown: Shown, title: str | None = None) -> go.Figure:
    from specviz.output.viz.tree import step_tree_data, tree_figure

    step = focus(traces["medusa"], shown)
    return tree_figure(*step_tree_data(step), title or f"Candidate tree, step {step.index}")


def mask(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.tree import mask_figure, step_tree_data

    step = focus(traces["medusa"], shown)
    parents, labels, _status, _hover = step_tree_data(step)
    return mask_figure(parents, labels, step.detail_as(MedusaDetail).path, "Tree-attention mask")


def twin(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """Hydra's tree on the step that starts at the same output token as Medusa's step in focus."""
    from specviz.output.viz.depth import step_at
    from specviz.output.viz.tree import step_tree_data, tree_figure

    mine = traces["medusa"]
    offset = sum(s.accepted for s in mine.steps if s.index < focus(mine, shown).index)
    step = step_at(traces["hydra"], offset)
    if step is None:
        raise IndexError(f"Hydra has no step starting at output token {offset}")
    return tree_figure(*step_tree_data(step), "Hydra (hover: what each head read)")


def budget(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
    """The tree-size sweep's predicted and measured A, the page's size marked ({"sweep", "total"})."""
    from specviz.output.viz.stored import swept_sizes
    from specviz.output.viz.tree import budget_figure

    sw = inputs["sweep"]
    return budget_figure(swept_sizes(sw), sw["predicted"], sw["measured"], inputs["total"])


def cost(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
    """The tree-size sweep's drafting and verifying times per size against plain decoding's."""
    from specviz.output.viz.stored import swept_sizes
    from specviz.output.viz.tree import cost_figure

    sw = inputs["sweep"]
    return cost_figure(swept_sizes(sw), sw["draft_ms"], sw["verify_ms"], sw["ar_ms"], sw["speedup"])


def depths(traces: dict[str, Trace], _shown: Shown, title: str = "") -> go.Figure:
    """Medusa's and Hydra's steps that accepted at least d drafted tokens, at Hydra's number of heads."""
    from specviz.output.viz.depth import acceptance_by_depth, depth_figure

    k = int(traces["hydra"].config.get("method", {}).get("heads", 4))  # a trace keeps its method's settings there
    series: dict[str, Sequence[float]] = {n: acceptance_by_depth(traces[n], k) for n in ("medusa", "hydra")}
    title = title or "Steps that accepted at least d drafted tokens, same prompt and tree size"
    return depth_figure(series, title, "share of steps", prefix="depth")


FIGURES = (
    Figure("medusa_tree", tree, method="medusa", one_step=True),
    Figure("medusa_mask", mask, method="medusa", one_step=True),
    Figure("medusa_steps", per_step("medusa")),
    Figure("medusa_tokens", strip("medusa"), method="medusa"),
    Figure("hydra_depths", depths),
    Figure("medusa_twin", partial(tree, title="Medusa"), method="medusa", one_step=True),
    Figure("hydra_twin", twin, method="hydra", one_step=True),
    Figure(
        "medusa_lookahead_origins",
        given(origins_figure, "medusa_lookahead"),
        method="medusa_lookahead",
    ),
    Figure(
        "medusa_lookahead_tree",
        given(busiest_tree, "medusa_lookahead"),
        method="medusa_lookahead",
    ),
    # stored: the heads' held-out top-1 ({"top1"}), the tree-size sweep ({"sweep"} and the page's "total")
    Figure("hydra_accuracy", given(depth_figure, "top1", **ACCURACY), "stored"),
    Figure("medusa_budget", budget, "stored"),
    Figure("medusa_cost", cost, "stored"),
)
# Medusa at the page's settings (its own `runs`), Hydra and Medusa + Lookahead beside it on the same tree fields while
# their toggles are on
BESIDE = (Beside("hydra", "medusa.hydra"), Beside("medusa_lookahead", "medusa.lookahead"))


def pairing_views(trace: Trace) -> dict[str, go.Figure]:
    """Medusa + Lookahead's own figures of one trace: Medusa's (the pool's nodes ringed in the tree) and who proposed
    each committed token."""
    return {**tree_gallery(trace), "origins": origins_figure(trace, slide=True)}


# each method's own figures, for export
VIEWS = {"medusa": tree_gallery, "hydra": tree_gallery, "medusa_lookahead": pairing_views}
PAGE = Page(
    "medusa",
    "Medusa",
    CONTROLS,
    runs,
    FIGURES,
    icon=":material/account_tree:",
    method="medusa",
    beside=BESIDE,
    views=VIEWS,
)
