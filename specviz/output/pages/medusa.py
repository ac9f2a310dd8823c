"""The Medusa page: heads guess ahead, a sparse candidate tree verified in one pass; Hydra's heads beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import MedusaDetail
from specviz.core.trace import Trace
from specviz.output.pages.page import REPEATS, Control, Figure, Page, Shown, focus, own, shape, steps_builder
from specviz.tuning.presets import PRESETS

CONTROLS = (
    Control("medusa.preset", "choice", options=tuple(p.key for p in PRESETS["medusa"])),
    Control("medusa.total_tokens", "int", 1, 65, field="total_tokens"),
    Control("medusa.acceptance", "choice", options=("exact", "typical"), field="rule"),
    Control("medusa.temperature", "float", 0.0, 1.5),
    Control("medusa.eps", "float", 0.01, 0.5, field="eps"),
    Control("medusa.delta", "float", 0.05, 1.0, field="delta"),
    Control("medusa.hydra", "bool"),  # Hydra beside Medusa
    Control("medusa.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], _figure: str, _methods: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    """Medusa at the page's settings, and Hydra beside it when its toggle is on."""
    cfg = methods.get("medusa").Config(**(shape("medusa", "medusa", values) | own(values, CONTROLS)))
    return {"medusa": cfg, **hydra(cfg, values.get("medusa.hydra", False))}, values.get("medusa.temperature")


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


def tokens(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.steps import token_strip

    return token_strip(traces["medusa"], upto=focus(traces["medusa"], shown).index)


def depths(traces: dict[str, Trace], _shown: Shown, title: str = "") -> go.Figure:
    """Medusa's and Hydra's steps that accepted at least d drafted tokens, at Hydra's number of heads."""
    from specviz.output.viz.depth import acceptance_by_depth, depth_figure

    k = int(traces["hydra"].config.get("method", {}).get("heads", 4))  # a trace keeps its method's settings there
    series: dict[str, Sequence[float]] = {n: acceptance_by_depth(traces[n], k) for n in ("medusa", "hydra")}
    title = title or "Steps that accepted at least d drafted tokens, same prompt and tree size"
    return depth_figure(series, title, "share of steps", prefix="depth")


PAGE = Page(
    "medusa",
    "views/medusa.py",
    "Medusa",
    CONTROLS,
    runs,
    (
        Figure("medusa_tree", tree, method="medusa", one_step=True),
        Figure("medusa_mask", mask, method="medusa", one_step=True),
        Figure("medusa_steps", steps_builder("medusa")),
        Figure("medusa_tokens", tokens, method="medusa"),
        Figure("hydra_depths", depths),
    ),
)
