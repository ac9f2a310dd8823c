"""The EAGLE page: a feature-level draft grows a tree where it is confident; EAGLE-3 and the hybrid beside it."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import EagleDetail, HybridDetail
from specviz.core.trace import Trace
from specviz.output.pages.page import (
    REPEATS,
    Beside,
    Builder,
    Control,
    Figure,
    Page,
    Shown,
    focus,
    given,
    per_step,
    strip,
)
from specviz.output.viz.depth import depth_figure
from specviz.output.viz.dflash import block_figure, drafting_figure, position_figure
from specviz.output.viz.dflash import gallery as dflash_gallery
from specviz.output.viz.eagle import draft_verify_figure, sweep_figure
from specviz.output.viz.eagle import gallery as eagle_gallery
from specviz.output.viz.eagle_growth import compare_figure
from specviz.output.viz.hybrid import gallery as hybrid_gallery
from specviz.tuning import presets

ACCURACY = {
    "title": "Held-out top-1 accuracy by draft depth (each head drafting from its own outputs)",
    "ytitle": "top-1 accuracy",
    "prefix": "depth",
}
DECODER_LAYERS = 30  # SmolLM2-135M's, whose low, middle and high layers EAGLE-3 fuses
CONTROLS = (
    Control("eagle.preset", "choice", options=tuple(p.key for p in presets.presets("eagle"))),
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
    Control("eagle.dflash", "bool"),  # DFlash beside EAGLE-3
    Control("eagle.repeats", "int", *REPEATS),
)


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


def verified(method: str, which: int) -> Builder:
    """The step's verified tree (0, its accepted path highlighted) or its tree-attention mask (1)."""

    def draw(traces: dict[str, Trace], shown: Shown) -> go.Figure:
        from specviz.output.viz.eagle import verify_figures

        return verify_figures(focus(traces[method], shown))[which]

    return draw


def pooled(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """The hybrid's step: the head's tree with the pool's grafted nodes, its accepted path."""
    from specviz.output.viz.eagle import growth_figure

    d = focus(traces["hybrid"], shown).detail_as(HybridDetail)
    return growth_figure(d.tree, accepted=d.path, sources=d.sources)


def origins(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.hybrid import origins_figure

    return origins_figure(traces["hybrid"])


def fusion(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.eagle3 import fusion_figure

    return fusion_figure(focus(traces["eagle3"], shown), int(shown.values.get("eagle.layers", DECODER_LAYERS)))


def sampling(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    from specviz.output.viz.treesampling import sampling_figure

    return sampling_figure(focus(traces["eagle"], shown))


FIGURES = (
    Figure("eagle_growth", growth, method="eagle", one_step=True),
    Figure("eagle_features", features, method="eagle", one_step=True, wide=True),
    Figure("eagle_verify", verified("eagle", 0), method="eagle", one_step=True),
    Figure("eagle_mask", verified("eagle", 1), method="eagle", one_step=True),
    Figure("eagle_steps", per_step("eagle")),
    Figure("eagle_tokens", strip("eagle"), method="eagle"),
    Figure("eagle_costs", given(draft_verify_figure, "eagle"), method="eagle"),
    Figure("hybrid_origins", origins, method="hybrid"),
    Figure("hybrid_tree", pooled, method="hybrid", one_step=True),
    Figure("hybrid_verify", verified("hybrid", 0), method="hybrid", one_step=True),
    Figure("hybrid_mask", verified("hybrid", 1), method="hybrid", one_step=True),
    Figure("eagle3_fusion", fusion, method="eagle3", one_step=True),
    Figure("dflash_blocks", given(block_figure, "dflash"), method="dflash"),
    Figure("dflash_positions", given(position_figure, "dflash"), method="dflash"),
    Figure("dflash_drafting", given(drafting_figure, "eagle3", "dflash"), method="dflash"),
    # both trees re-grown on the step shown ({"regrown": tuning.eagle_replay.replay_trees}); the lesson
    # re-grows them when it records (output/lesson/stored.regrown)
    Figure(
        "eagle_static_vs_dynamic",
        given(compare_figure, "regrown"),
        method="eagle",
        regrown=True,
    ),
    # stored: the calibrated sweep of tree shapes ({"sweep", "where"}), the heads' held-out top-1 by depth
    Figure("eagle_sweep", given(sweep_figure, "sweep", "where=where"), "stored"),
    Figure("eagle3_accuracy", given(depth_figure, "top1", **ACCURACY), "stored"),
    Figure("eagle_tree_sampling", sampling, method="eagle", one_step=True, lesson_only=True),
)
# EAGLE-2 at the page's tree shape, Configs built by Page.configs from CONTROLS alone; EAGLE-3 beside it while
# its toggle is on, the hybrid when a stop shows it or focuses its figure (the page passes it while its toggle is on)
BESIDE = (Beside("hybrid"), Beside("eagle3", "eagle.eagle3"), Beside("dflash", "eagle.dflash"))
# each method's own figures, for export
VIEWS = {"eagle": eagle_gallery, "eagle3": eagle_gallery, "hybrid": hybrid_gallery, "dflash": dflash_gallery}
PAGE = Page(
    "eagle", "EAGLE", CONTROLS, figures=FIGURES, icon=":material/flight:", method="eagle", beside=BESIDE, views=VIEWS
)
