"""EAGLE figures: the verified tree and its mask, the head's inputs, where a step's time goes, the shape sweep.

The growing draft tree and static-vs-dynamic comparison live in viz.eagle_growth (re-exported here).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.core.details import EagleDetail
from specviz.core.trace import StepTrace, Trace
from specviz.output.focus import UNCERTAIN
from specviz.output.viz.eagle_growth import compare_figure, growth_figure, label, node_hover
from specviz.output.viz.steps import token_strip
from specviz.output.viz.theme import DRAFT, JUDGE, NEUTRAL, REJECT, VERIFY, apply, method_color
from specviz.output.viz.tree import mask_figure, tree_figure

__all__ = [
    "compare_figure",
    "draft_verify_figure",
    "feature_figure",
    "gallery",
    "growth_figure",
    "sweep_figure",
    "verified_tree_data",
    "verify_figures",
]

EAGLE = method_color("eagle")


def verified_tree_data(step: StepTrace) -> tuple[list[int], list[str], list[str], list[str]]:
    """(parents, labels, status, hover) of the nodes a step verified, for viz.tree's tree and mask figures."""
    d = step.detail_as(EagleDetail)
    tree, nodes, parents = d.tree, d.verify_nodes, d.verify_parents
    path = {nodes.index(n) for n in d.path}
    judged = {r["node"]: r for r in d.decisions or []}
    status, hover = [], []
    for j, n in enumerate(nodes):
        if j in path:
            status.append("accepted")
        elif parents[j] in path and (d.decisions is None or j in judged):
            status.append("rejected")
        else:
            status.append("unreached")
        extra = f"<br>target p = {judged[j]['p']:.3f}, u = {judged[j]['u']:.3f}" if j in judged else ""
        extra += f"<br>proposed by: {_source(d, n)}" if _source(d, n) else ""
        hover.append(node_hover(tree, n) + f"<br><b>{status[-1]}</b>" + extra)
    return (
        parents,
        [POOL_MARK * (_source(d, n) in ("pool", "both")) + label(tree["texts"][n]) for n in nodes],
        status,
        hover,
    )


POOL_MARK = "⊕"  # before the label of a verified node the n-gram pool proposed (the hybrid's trees)


def _source(d: EagleDetail, node: int) -> str:
    """Who proposed a drafted node: '' for EAGLE-2 (always the head), head / pool / both for the hybrid."""
    sources = getattr(d, "sources", None)
    return sources[node] if sources and node < len(sources) else ""


def verify_figures(step: StepTrace, slide: bool = False) -> tuple[go.Figure, go.Figure]:
    """The verified tree with the accepted path, and its tree-attention mask (viz.tree's figures)."""
    parents, labels, status, hover = verified_tree_data(step)
    path = [j for j, s in enumerate(status) if s == "accepted"]
    tree = tree_figure(
        parents,
        labels,
        status,
        hover,
        f"Verification: {len(path) - 1} drafted token(s) accepted + 1 from the target",
        slide,
    )
    title = "Tree-attention mask of the verified nodes"
    if any(lab.startswith(POOL_MARK) for lab in labels):
        title += f"<br><sup>{POOL_MARK}: proposed by the n-gram pool</sup>"  # a subtitle: fits a narrow column
    return tree, mask_figure(parents, labels, path, title, slide)


def feature_figure(step: StepTrace, slide: bool = False) -> go.Figure:
    """What EAGLE's head consumes (f_t and the next token's embedding) vs a Medusa head (f_t only)."""
    f = step.detail_as(EagleDetail).features
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.2,  # room for the heatmap's colour bar and the bars' token labels between them
        subplot_titles=[  # two short lines each: a subplot's title spans only its own column
            f"16 largest dims of f_t+1<br>cos(pred, true) = {f['cos_pred_true']:.2f} · "
            f"cos(f_t, true) = {f['cos_prev_true']:.2f}",
            f"Target's x_t+1: entropy {step.entropy:.2f} nats<br>"
            + ("Medusa can't know which" if step.entropy >= UNCERTAIN else "sure here, little to hedge"),
        ],
    )
    fig.add_trace(_feature_heatmap(f), row=1, col=1)
    fig.add_trace(_next_token_bars(step), row=1, col=2)
    fig.update_xaxes(title_text="feature dimension", row=1, col=1)
    fig.update_xaxes(title_text="target p(x_t+1)", row=1, col=2, rangemode="tozero")
    fig.update_layout(margin={"t": 170 if slide else 135})  # the title, then the subplots' two-line titles
    return apply(fig, "What EAGLE's head reads: the token actually chosen", slide, height=380)


def _feature_heatmap(f: dict[str, Any]) -> go.Heatmap:
    """The recorded feature dimensions of f_t, the embedding, and the predicted and true f_t+1, one row each."""
    rows = [
        ("f_t  (Medusa + EAGLE input)", f["f_t"]),
        ("embed(x_t+1)  (EAGLE only)", f["embed"]),
        ("EAGLE predicted f_t+1", f["f_pred"]),
        ("true f_t+1 (verification)", f["f_true"]),
    ]
    return go.Heatmap(
        z=[r[1] for r in rows][::-1],
        y=[r[0] for r in rows][::-1],
        x=[str(d) for d in f["dims"]],
        colorscale="RdBu",
        zmid=0,
        colorbar={"title": {"text": "value"}, "x": 0.5, "xanchor": "left", "thickness": 14},  # beside its own panel
        hovertemplate="%{y}<br>dim %{x}: %{z:.2f}<extra></extra>",
    )


def _next_token_bars(step: StepTrace) -> go.Bar:
    """The target's top next tokens, the one committed in EAGLE's colour."""
    chosen, top = step.committed[0], step.top
    return go.Bar(
        x=[a.prob for a in top][::-1],
        y=[f"{label(a.text)} " for a in top][::-1],
        orientation="h",
        showlegend=False,
        marker_color=[EAGLE if a.id == chosen else NEUTRAL for a in top][::-1],
        hovertemplate="%{y}: p = %{x:.3f}<extra></extra>",
    )


def draft_verify_figure(trace: Trace, slide: bool = False) -> go.Figure:
    """Per step: propose, verify and accept time (ms); proposing is the head, verify is one target forward."""
    steps = [s for s in trace.steps if s.forward_tokens]
    fig = go.Figure(
        [
            go.Bar(
                x=[s.index for s in steps], y=[1000 * s.verify_s for s in steps], name="verify", marker_color=VERIFY
            ),
            go.Bar(
                x=[s.index for s in steps], y=[1000 * s.propose_s for s in steps], name="propose", marker_color=DRAFT
            ),
            go.Bar(x=[s.index for s in steps], y=[1000 * s.accept_s for s in steps], name="accept", marker_color=JUDGE),
        ]
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="ms")
    return apply(fig, "Where a step's time goes", slide, height=300)


def sweep_figure(sweep: dict[str, Any], title: str | None = None, slide: bool = False, where: str = "") -> go.Figure:
    """Measured tree shapes: A (tokens per step) against speedup, one point per depth/top_k/total_tokens.

    `where` says where and when the sweep was measured (its provenance, e.g. Provenance.describe()).

    Deeper and wider trees move right (more tokens per target pass) but also down once their draft
    rounds and verify width cost more than those tokens earn; the default shape is ringed.
    """
    rows = sweep["rows"]
    chosen = sweep.get("chosen", {})

    def is_chosen(r: dict) -> bool:
        return all(r[k] == chosen.get(k) for k in ("depth", "top_k", "total_tokens"))

    text = [f"{r['depth']}/{r['top_k']}/{r['total_tokens']}" for r in rows]
    fig = go.Figure(
        go.Scatter(
            x=[r["A"] for r in rows],
            y=[r["speedup"] for r in rows],
            mode="markers+text",
            text=text,
            textposition="top center",
            showlegend=False,
            marker={
                "size": [8 + 1.2 * r["total_tokens"] for r in rows],
                "color": EAGLE,
                "opacity": 0.8,
                "line": {"width": [4 if is_chosen(r) else 0 for r in rows], "color": "#111827"},
            },
            customdata=[[r["draft_ms"], r["verify_ms"], r["identical"], r["prompts"]] for r in rows],
            hovertemplate="depth/top_k/total %{text}: %{y:.2f}×, A = %{x:.2f}<br>draft %{customdata[0]:.1f} ms, "
            "verify %{customdata[1]:.1f} ms per step<br>identical to plain decoding: "
            "%{customdata[2]}/%{customdata[3]}<extra></extra>",
        )
    )
    fig.add_hline(y=1.0, line={"dash": "dash", "color": REJECT}, annotation_text="plain decoding")
    fig.update_xaxes(title="A: tokens per target forward")
    fig.update_yaxes(title="speedup over ar (median ratio)")
    title = title or f"Tree shapes, {where or 'measured elsewhere'} (depth/top_k/total_tokens; ringed = default)"
    return apply(fig, title, slide, height=420)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """An EAGLE trace's own figures, for export: the busiest step's growth, verification and head inputs."""
    steps = trace.detailed(EagleDetail)
    out = {"tokens": token_strip(trace, slide=True)}
    if steps:
        busiest = lambda sd: (sd[0].accepted, -sd[0].index)  # noqa: E731
        best, d = max(steps, key=busiest)
        out["tree"] = growth_figure(d.tree, accepted=d.path, slide=True, sources=getattr(d, "sources", None))
        out["verify"], out["mask"] = verify_figures(best, slide=True)
        drafted = [sd for sd in steps if sd[1].features]  # the hybrid's copy steps ran no head
        if drafted:
            out["features"] = feature_figure(max(drafted, key=busiest)[0], slide=True)
    return out
