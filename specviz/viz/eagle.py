"""EAGLE figures: the draft tree growing round by round, its verification, static vs dynamic, the head's inputs."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.trace import StepTrace, Trace
from specviz.viz.theme import ACCEPT, DRAFT, NEUTRAL, REJECT, VERIFY, apply, method_color
from specviz.viz.tree import _dfs_order, mask_figure, token_strip, tree_figure

EAGLE = method_color("eagle")
# node styles of the growing tree: colour says the rerank's verdict, a diamond says "ran through the head"
GROW_COLORS = {"root": "#111827", "drafted": DRAFT, "kept": VERIFY, "pruned": NEUTRAL, "accepted": ACCEPT}


def label(text: str) -> str:
    return repr(text)[1:-1][:12] or "␣"


def grow_layout(parents: list[int]) -> dict[int, tuple[float, float]]:
    """One column per depth; within a column, depth-first order, so every subtree stays contiguous."""
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    columns: dict[int, list[int]] = {}
    for i in _dfs_order(parents):
        columns.setdefault(depth[i], []).append(i)
    return {i: (float(d), (len(col) - 1) / 2 - r) for d, col in columns.items() for r, i in enumerate(col)}


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
    for state, color in GROW_COLORS.items():
        for expanded in (True, False):
            idx = [i for i in shown if states[i] == state and (tree["expanded"][i] > 0) == expanded]
            if not idx:
                continue
            big = state in ("root", "accepted", "kept")
            fig.add_trace(
                go.Scatter(
                    x=[pos[i][0] for i in idx],
                    y=[pos[i][1] for i in idx],
                    mode="markers+text",
                    text=[label(tree["texts"][i]) if state != "pruned" else "" for i in idx],
                    textposition="middle right",
                    textfont={"size": 15 if slide else 10},
                    marker={
                        "size": (16 if big else 9) * (1.3 if slide else 1),
                        "color": color,
                        "symbol": "diamond" if expanded else "circle",
                        "line": {"color": "white", "width": 1},
                    },
                    name=f"{state}{' (expanded)' if expanded else ''}",
                    legendgroup=f"{state}{expanded}",
                    showlegend=legend,
                    hovertext=[node_hover(tree, i) for i in idx],
                    hoverinfo="text",
                ),
                **where,
            )


def growth_figure(
    tree: dict[str, Any],
    stage: int | None = None,
    accepted: list[int] | None = None,
    title: str | None = None,
    slide: bool = False,
) -> go.Figure:
    """The drafted tree after `stage` rounds (depth + 1 = after the rerank); diamonds ran through the head."""
    depth = max(tree["depth"])
    stage = depth + 1 if stage is None else stage
    acc = set(accepted or []) if stage > depth else set()
    pos = grow_layout(tree["parents"])
    shown = [i for i in range(len(tree["parents"])) if tree["depth"][i] <= stage]
    states = {i: node_state(tree, i, stage, acc) for i in shown}
    fig = go.Figure()
    _edges(fig, tree, pos, shown, acc)
    _nodes(fig, tree, pos, shown, states, True, slide)
    fig.update_xaxes(visible=False, range=[-0.3, depth + 0.8])
    fig.update_yaxes(visible=False)
    widest = max(tree["depth"].count(d) for d in range(depth + 1))
    if title is None:
        title = (
            f"Round {stage} of {depth}: the head drafts depth {stage}"
            if stage <= depth
            else f"After the rerank: {sum(tree['kept'])} of {len(shown)} drafted nodes go to verification"
        )
    return apply(fig, title, slide, height=min(1400, max(380, 14 * widest + 120)))


def verified_tree_data(step: StepTrace) -> tuple[list[int], list[str], list[str], list[str]]:
    """(parents, labels, status, hover) of the nodes a step verified, for viz.tree's tree and mask figures."""
    d = step.detail
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
        hover.append(node_hover(tree, n) + f"<br><b>{status[-1]}</b>" + extra)
    return parents, [label(tree["texts"][n]) for n in nodes], status, hover


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
    return tree, mask_figure(parents, labels, path, "Tree-attention mask of the verified nodes", slide)


def compare_figure(replay: dict[str, dict[str, Any]], slide: bool = False) -> go.Figure:
    """EAGLE-1's static tree next to EAGLE-2's dynamic tree, grown from the same context and root."""
    kinds = [k for k in ("static", "dynamic") if k in replay]
    titles = [
        f"{'EAGLE-1 static' if k == 'static' else 'EAGLE-2 dynamic'}: "
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
        height = max(height, 24 * max(sub["depth"].count(d) for d in set(sub["depth"])) + 140)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply(
        fig, "Same step, same head: static vs dynamic tree (green = accepted path)", slide, height=min(900, height)
    )


def feature_figure(step: StepTrace, slide: bool = False) -> go.Figure:
    """What EAGLE's head consumes (f_t and the next token's embedding) vs a Medusa head (f_t only)."""
    f = step.detail.features
    rows = [
        ("f_t  (Medusa + EAGLE input)", f["f_t"]),
        ("embed(x_t+1)  (EAGLE only)", f["embed"]),
        ("EAGLE predicted f_t+1", f["f_pred"]),
        ("true f_t+1 (verification)", f["f_true"]),
    ]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.14,
        subplot_titles=[
            f"Feature dims (16 largest of f_t+1) · cos(pred, true) = "
            f"{f['cos_pred_true']:.2f}, cos(f_t, true) = {f['cos_prev_true']:.2f}",
            "Target's x_t+1: Medusa can't know which",
        ],
    )
    fig.add_trace(
        go.Heatmap(
            z=[r[1] for r in rows][::-1],
            y=[r[0] for r in rows][::-1],
            x=[str(d) for d in f["dims"]],
            colorscale="RdBu",
            zmid=0,
            showscale=False,
            hovertemplate="%{y}<br>dim %{x}: %{z:.2f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    chosen = step.committed[0]
    top = step.top
    fig.add_trace(
        go.Bar(
            x=[a.prob for a in top][::-1],
            y=[f"{label(a.text)} " for a in top][::-1],
            orientation="h",
            showlegend=False,
            marker_color=[EAGLE if a.id == chosen else NEUTRAL for a in top][::-1],
            hovertemplate="%{y}: p = %{x:.3f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="feature dimension", row=1, col=1)
    fig.update_xaxes(title_text="target p(x_t+1)", row=1, col=2, rangemode="tozero")
    return apply(fig, "What the head consumes: EAGLE sees the token that was actually chosen", slide, height=330)


def draft_verify_figure(trace: Trace, slide: bool = False) -> go.Figure:
    """Per step: draft time vs verify time (ms); the draft is the head, verify is one target forward."""
    steps = [s for s in trace.steps if s.forward_tokens]
    fig = go.Figure(
        [
            go.Bar(
                x=[s.index for s in steps], y=[1000 * s.verify_s for s in steps], name="verify", marker_color=VERIFY
            ),
            go.Bar(x=[s.index for s in steps], y=[1000 * s.draft_s for s in steps], name="draft", marker_color=DRAFT),
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
    steps = [s for s in trace.steps if s.detail is not None]
    out = {"tokens": token_strip(trace, slide=True)}
    if steps:
        best = max(steps, key=lambda s: (s.accepted, -s.index))
        d = best.detail
        out["tree"] = growth_figure(d.tree, accepted=d.path, slide=True)
        out["verify"], out["mask"] = verify_figures(best, slide=True)
        out["features"] = feature_figure(best, slide=True)
    return out
