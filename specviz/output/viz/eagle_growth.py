"""EAGLE's draft tree as it grows, round by round, the rerank's verdict, and static (EAGLE-1) vs dynamic (EAGLE-2)."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.output.viz.theme import ACCEPT, DRAFT, NEUTRAL, VERIFY, apply, token_text
from specviz.output.viz.tree import label_positions, tree_layout, tree_sizes

# node styles of the growing tree: colour says the rerank's verdict, a diamond says "ran through the head"
GROW_COLORS = {"root": "#111827", "drafted": DRAFT, "kept": VERIFY, "pruned": NEUTRAL, "accepted": ACCEPT}
# the legend reads accepted path first, then what was kept, drafted, pruned, and the root
LEGEND_RANK = {"accepted": 1, "kept": 2, "drafted": 3, "pruned": 4, "root": 5}


def label(text: str) -> str:
    return token_text(text)


def grow_layout(parents: list[int]) -> dict[int, tuple[float, float]]:
    """viz.tree's tidy tree: depth on x, leaves evenly spaced, each parent centred over its children."""
    return tree_layout(parents)


def node_state(tree: dict[str, Any], i: int, stage: int, accepted: set[int]) -> str:
    """A node's colour at a stage: rounds 1..depth draw, stage depth+1 reranks, accepted shows the verdict."""
    if i == 0:
        return "root"
    if i in accepted:
        return "accepted"
    if stage <= max(tree["depth"]):
        return "drafted"
    return "kept" if tree["kept"][i] else "pruned"


def node_hover(tree: dict[str, Any], i: int) -> str:
    if i == 0:
        return f"root {tree['texts'][0]!r}: the target's own next token"
    rnd = tree["expanded"][i]
    return (
        f"{tree['texts'][i]!r} · depth {tree['depth'][i]}<br>draft p given parent = {tree['conf'][i]:.3f}"
        f"<br>path confidence = {math.exp(tree['score'][i]):.4f}<br>"
        f"{'expanded in round ' + str(rnd) if rnd > 0 else 'not expanded'} · "
        f"{'kept for verification' if tree['kept'][i] else 'pruned by the rerank'}"
    )


def _edges(fig: go.Figure, tree: dict[str, Any], pos, shown: list[int], accepted: set[int], **where) -> None:
    for i in shown:
        p = tree["parents"][i]
        if p < 0:
            continue
        on_path = i in accepted and (p in accepted or p == 0)
        style = (
            {"color": ACCEPT, "width": 5}
            if on_path
            else {"color": "#cbd5e1", "width": 1.2, "dash": "solid" if tree["kept"][i] else "dot"}
        )
        fig.add_trace(
            go.Scatter(
                x=[pos[p][0], pos[i][0]],
                y=[pos[p][1], pos[i][1]],
                mode="lines",
                line=style,
                hoverinfo="skip",
                showlegend=False,
            ),
            **where,
        )


def _group(
    tree: dict[str, Any], pos, idx: list[int], state: str, expanded: bool, labels: tuple, legend: bool, slide: bool
) -> go.Scatter:
    """One legend group of nodes (a state, expanded or not): markers, their token labels and hovers."""
    spots, font = labels
    big = state in ("root", "accepted", "kept")
    return go.Scatter(
        x=[pos[i][0] for i in idx],
        y=[pos[i][1] for i in idx],
        mode="markers+text",
        text=[label(tree["texts"][i]) for i in idx],
        textposition=[spots[i] for i in idx],
        textfont={
            "size": font if slide else 11,
            "color": "#64748b" if state == "pruned" else "#0f172a",
            "shadow": "auto",
        },
        marker={
            "size": (16 if big else 9) * (1.3 if slide else 1),
            "color": GROW_COLORS[state],
            "symbol": "diamond" if expanded else "circle",
            "line": {"color": "white", "width": 1},
        },
        name=f"{state}{' (expanded)' if expanded else ''}",
        legendgroup=f"{state}{expanded}",
        legendrank=LEGEND_RANK[state] * 2 + (0 if expanded else 1),
        showlegend=legend,
        hovertext=[node_hover(tree, i) for i in idx],
        hoverinfo="text",
    )


def _nodes(
    fig: go.Figure,
    tree: dict[str, Any],
    pos,
    shown: list[int],
    states: dict[int, str],
    legend: bool,
    slide: bool,
    **where,
) -> None:
    spots = label_positions(tree["parents"])
    _, font, _ = tree_sizes(tree["parents"], slide)
    for state in GROW_COLORS:
        for expanded in (True, False):
            idx = [i for i in shown if states[i] == state and (tree["expanded"][i] > 0) == expanded]
            if not idx:
                continue
            fig.add_trace(_group(tree, pos, idx, state, expanded, (spots, font), legend, slide), **where)


def growth_figure(
    tree: dict[str, Any],
    stage: int | None = None,
    accepted: list[int] | None = None,
    title: str | None = None,
    slide: bool = False,
    sources: list[str] | None = None,
) -> go.Figure:
    """The drafted tree after `stage` rounds (depth + 1 = after the rerank); diamonds ran through the head.
    `sources` (per node: head, pool or both, as the hybrid records) rings the nodes the n-gram pool proposed."""
    depth = max(tree["depth"])
    at = depth + 1 if stage is None else stage  # the rounds shown
    acc = set(accepted or []) if at > depth else set()
    pos = grow_layout(tree["parents"])
    shown = [i for i in range(len(tree["parents"])) if tree["depth"][i] <= at]
    states = {i: node_state(tree, i, at, acc) for i in shown}
    fig = go.Figure()
    _edges(fig, tree, pos, shown, acc)
    _nodes(fig, tree, pos, shown, states, True, slide)
    if sources:
        _sources(fig, pos, [i for i in shown if tree["kept"][i]], sources, slide)
    ys = [y for _, y in pos.values()]
    fig.update_xaxes(visible=False, range=[-0.45, depth + 0.75])  # room for the root's label and the leaves'
    fig.update_yaxes(visible=False, range=[min(ys) - 0.7, max(ys) + 0.9])
    if title is None:
        title = (
            f"Round {at} of {depth}: the head drafts depth {at}"
            if at <= depth
            else f"After the rerank: {sum(tree['kept'])} of {len(shown)} drafted nodes go to verification"
        )
    return apply(fig, title, slide, height=max(380, tree_sizes(tree["parents"], slide)[0]))


SOURCE_RINGS = {
    "pool": ("square-open", "proposed by the n-gram pool"),
    "both": ("circle-open", "by the head and the pool"),
}


def _sources(fig: go.Figure, pos: dict, nodes: list[int], sources: list[str], slide: bool) -> None:
    """A ring around each verified node the n-gram pool proposed (alone, or as well as the head)."""
    for kind, (symbol, label) in SOURCE_RINGS.items():
        mine = [i for i in nodes if i < len(sources) and sources[i] == kind]
        if mine:
            fig.add_scatter(
                x=[pos[i][0] for i in mine],
                y=[pos[i][1] for i in mine],
                mode="markers",
                marker={"symbol": symbol, "size": 34 if slide else 26, "color": "#332288", "line": {"width": 3}},
                name=label,
                hoverinfo="skip",
            )


def compare_figure(replay: dict[str, dict[str, Any]], slide: bool = False, title: str | None = None) -> go.Figure:
    """A static tree next to EAGLE-2's dynamic tree, grown from the same context and root; the static one is
    Medusa's greedy sparse tree over the head's calibrated rank accuracies (EAGLE-1 ships a fixed shape of its
    own), so it is labelled by how it was built, not as EAGLE-1's."""
    kinds = [k for k in ("static", "dynamic") if k in replay]
    titles = [
        f"{'Static (calibrated)' if k == 'static' else 'EAGLE-2 dynamic'}: "
        f"{len(replay[k]['accepted']) - 1} accepted of {sum(replay[k]['kept']) - 1}"
        for k in kinds
    ]
    fig = make_subplots(rows=1, cols=len(kinds), subplot_titles=titles, horizontal_spacing=0.04)
    height = 380
    for c, k in enumerate(kinds, start=1):
        tree = replay[k]
        kept = [i for i, keep in enumerate(tree["kept"]) if keep]
        sub = {
            key: [tree[key][i] for i in kept]
            for key in ("tokens", "texts", "depth", "score", "conf", "expanded", "kept")
        }
        sub["parents"] = [-1] + [kept.index(tree["parents"][i]) for i in kept[1:]]
        acc = {kept.index(i) for i in tree["accepted"]}
        pos = grow_layout(sub["parents"])
        shown = list(range(len(kept)))
        states = {i: node_state(sub, i, max(sub["depth"]) + 1, acc) for i in shown}
        _edges(fig, sub, pos, shown, acc, row=1, col=c)
        _nodes(fig, sub, pos, shown, states, c == 1, slide, row=1, col=c)
        height = max(height, tree_sizes(sub["parents"], slide)[0] + 60)
        ys = [y for _, y in pos.values()]
        fig.update_xaxes(range=[-0.45, max(sub["depth"]) + 0.75], row=1, col=c)
        fig.update_yaxes(range=[min(ys) - 0.7, max(ys) + 0.9], row=1, col=c)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig = apply(fig, title or "Same step and head: static vs dynamic tree", slide, height=min(1400, height))
    # the legend below both trees, clear of the subplot titles
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.02, "xanchor": "left", "x": 0})
    return fig
