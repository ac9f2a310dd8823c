"""The EAGLE page: a feature-level draft grows a tree where it is confident; EAGLE-3 and the hybrid beside it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.details import EagleDetail
from specviz.core.trace import Trace
from specviz.output.pages.page import REPEATS, Control, Figure, Page, Shown, focus, own, shape, steps_builder
from specviz.tuning.presets import PRESETS

DECODER_LAYERS = 30  # SmolLM2-135M's, whose low, middle and high layers EAGLE-3 fuses
CONTROLS = (
    Control("eagle.preset", "choice", options=tuple(p.key for p in PRESETS["eagle"])),
    Control("eagle.depth", "int", 1, 8, field="depth"),
    Control("eagle.top_k", "int", 1, 16, field="top_k"),
    Control("eagle.total_tokens", "int", 2, 80, field="total_tokens"),
    Control("eagle.tree", "choice", options=("dynamic", "static"), field="tree"),
    Control("eagle.min_tokens", "int", 0, 16, field="min_tokens"),  # the confidence budget (0: fixed)
    Control("eagle.node_floor", "float", 0.0, 1.0, field="node_floor"),
    Control("eagle.depth_floor", "float", 0.0, 1.0, field="depth_floor"),
    Control("eagle.temperature", "float", 0.0, 1.5),
    Control("eagle.eagle3", "bool"),  # EAGLE-3 beside EAGLE-2
    Control("eagle.hybrid", "bool"),  # the hybrid beside EAGLE-2
    Control("eagle.repeats", "int", *REPEATS),
)


def runs(values: dict[str, Any], figure: str, shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    """EAGLE-2 at the page's tree shape; the hybrid when a stop shows it, EAGLE-3 when its toggle is on."""
    fields = budgeted(shape("eagle", "eagle", values) | own(values, CONTROLS))
    names = ["eagle", *(["hybrid"] if figure == "hybrid_origins" or "hybrid" in shows else [])]
    names += ["eagle3"] if values.get("eagle.eagle3") else []
    return {n: methods.get(n).Config(**fields) for n in names}, values.get("eagle.temperature")


def budgeted(fields: dict[str, Any]) -> dict[str, Any]:
    """The confidence budget's floor of nodes kept within what the Config accepts: 0 (fixed) stays 0, else
    between 2 and total_tokens; a static tree keeps its fixed shape."""
    least = int(fields.get("min_tokens", 0))
    if least and fields.get("tree", "dynamic") == "dynamic":
        return fields | {"min_tokens": max(2, min(least, int(fields.get("total_tokens", least))))}
    return fields | ({"min_tokens": 0} if least else {})


def growth(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """The step's tree at the page's stage ("round k"), by default the last: reranked and verified."""
    from specviz.output.viz.eagle import growth_figure

    d = focus(traces["eagle"], shown).detail_as(EagleDetail)
    last = max(d.tree["depth"]) + 1
    stage = str(shown.values.get("eagle.stage", ""))
    rounds = int(stage.split()[-1]) if stage.startswith("round ") and stage.split()[-1].isdigit() else last
    return growth_figure(d.tree, min(rounds, last), d.path)


def features(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.eagle import feature_figure

    return feature_figure(focus(traces["eagle"], shown))


def verify(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.eagle import verify_figures

    return verify_figures(focus(traces["eagle"], shown))[0]


def origins(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.hybrid import origins_figure

    return origins_figure(traces["hybrid"])


def fusion(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.eagle3 import fusion_figure

    return fusion_figure(focus(traces["eagle3"], shown), DECODER_LAYERS)


def sampling(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.treesampling import sampling_figure

    return sampling_figure(focus(traces["eagle"], shown))


PAGE = Page(
    "eagle",
    "views/eagle.py",
    "EAGLE",
    CONTROLS,
    runs,
    (
        Figure("eagle_growth", growth, method="eagle", one_step=True),
        Figure("eagle_features", features, method="eagle", one_step=True, wide=True),
        Figure("eagle_verify", verify, method="eagle", one_step=True),
        Figure("eagle_steps", steps_builder("eagle")),
        Figure("hybrid_origins", origins, method="hybrid"),
        Figure("eagle3_fusion", fusion, method="eagle3", one_step=True),
        # builds re-grown when recorded (output/lesson/stored.regrown): its trees at the step shown, re-run
        Figure("eagle_static_vs_dynamic", growth, method="eagle", regrown=True),
        Figure("eagle_tree_sampling", sampling, method="eagle", one_step=True, lesson_only=True),
    ),
)
