"""Tree figures: the candidate tree (networkx layout), the tree-attention mask, tokens by step, budget and cost.

`tree_figure` and `mask_figure` take plain parents + per-node labels/status, so any tree method can use them.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import plotly.graph_objects as go

from specviz.compare import running_speedup
from specviz.trace import StepTrace, Trace
from specviz.viz.theme import ACCEPT, DRAFT, NEUTRAL, REJECT, VERIFY, apply, method_color

STATUS_COLORS = {"accepted": ACCEPT, "rejected": REJECT, "passed": DRAFT, "unreached": NEUTRAL}
STEP_COLORS = ["#c4b5fd", "#a5f3fc", "#fde68a", "#bbf7d0", "#fecaca", "#ddd6fe", "#bfdbfe", "#fed7aa"]


def _dfs_order(parents: list[int]) -> list[int]:
    """Nodes in depth-first preorder, so each layer of the layout is ordered without crossing edges."""
    kids: list[list[int]] = [[] for _ in parents]
    for i, p in enumerate(parents[1:], start=1):
        kids[p].append(i)
    order, stack = [], [0]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(kids[node]))
    return order


def tree_layout(parents: list[int]) -> dict[int, tuple[float, float]]:
    """networkx multipartite layout: one column per depth, root on the left."""
    depth = [0] * len(parents)
    g = nx.DiGraph()
    for i in _dfs_order(parents):
        if i:
            depth[i] = depth[parents[i]] + 1
        g.add_node(i, depth=depth[i])
    g.add_edges_from((p, i) for i, p in enumerate(parents) if p >= 0)
    pos = nx.multipartite_layout(g, subset_key="depth", align="vertical", scale=1.0)
    return {i: (float(x), -float(y)) for i, (x, y) in pos.items()}  # first child on top


def tree_figure(
    parents: list[int],
    labels: list[str],
    status: list[str],
    hover: list[str] | None = None,
    title: str | None = None,
    slide: bool = False,
) -> go.Figure:
    """Draw a token tree: nodes coloured by status, edges of the accepted path thick and green."""
    pos = tree_layout(parents)
    fig = go.Figure()
    for i, p in enumerate(parents):
        if p < 0:
            continue
        on_path = status[i] == "accepted" and status[p] == "accepted"
        fig.add_trace(
            go.Scatter(
                x=[pos[p][0], pos[i][0]],
                y=[pos[p][1], pos[i][1]],
                mode="lines",
                line={"color": ACCEPT if on_path else "#cbd5e1", "width": 5 if on_path else 1.5},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    for name, color in STATUS_COLORS.items():
        idx = [i for i, s in enumerate(status) if s == name]
        if not idx:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[i][0] for i in idx],
                y=[pos[i][1] for i in idx],
                mode="markers+text",
                name=name,
                text=[labels[i] for i in idx],
                textposition="middle right",
                marker={"size": 22 if slide else 16, "color": color, "line": {"color": "white", "width": 1}},
                hovertext=[(hover or labels)[i] for i in idx],
                hoverinfo="text",
            )
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return apply(fig, title, slide, height=max(320, 34 * max(_layer_sizes(parents))))


def _layer_sizes(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return [depth.count(d) for d in range(max(depth) + 1)]


def mask_figure(
    parents: list[int], labels: list[str], path: list[int], title: str | None = None, slide: bool = False
) -> go.Figure:
    """Tree-attention mask: row i may attend column j (its ancestors and itself); accepted path darker."""
    n = len(parents)
    on_path = set(path)
    z = [[0] * n for _ in range(n)]
    for i in range(n):
        j = i
        while j >= 0:
            z[i][j] = 2 if i in on_path and j in on_path else 1
            j = parents[j]
    ticks = [f"{i}:{labels[i]}" for i in range(n)]
    text = [["path" if v == 2 else ("sees" if v else "masked") for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=ticks,
            y=ticks,
            zmin=0,
            zmax=2,
            showscale=False,
            xgap=1,
            ygap=1,
            text=text,
            colorscale=[
                [0, "#f1f5f9"],
                [0.33, "#f1f5f9"],
                [0.34, "#93c5fd"],
                [0.66, "#93c5fd"],
                [0.67, ACCEPT],
                [1, ACCEPT],
            ],
            hovertemplate="query %{y}<br>key %{x}<br>%{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="query node (row)", tickfont={"size": 10 if n > 24 else 12})
    fig.update_xaxes(
        title="key node (column); the prefix is always visible", tickangle=-60, tickfont={"size": 10 if n > 24 else 12}
    )
    return apply(fig, title, slide, height=max(360, 24 * n + 160))


def step_tree_data(step: StepTrace) -> tuple[list[int], list[str], list[str], list[str]]:
    """(parents, labels, status, hover) of a Medusa step's tree."""
    nodes: list[dict[str, Any]] = step.detail.nodes
    labels = [repr(n["text"])[1:-1] or "␣" for n in nodes]
    hover = []
    for i, n in enumerate(nodes):
        if i == 0:
            hover.append(f"root {n['text']!r}: the target's own token")
            continue
        hover.append(
            f"node {i} {n['text']!r}<br>head {n['head']}, rank {n['rank'] + 1}<br>"
            f"head p = {n['head_prob']:.3f}, target p = {n['target_prob']:.3f}<br>"
            f"{n['status']}: {n['reason']}"
        )
    return step.detail.parents, labels, [n["status"] for n in nodes], hover


def token_strip(trace: Trace, upto: int | None = None, per_line: int = 16, slide: bool = False) -> go.Figure:
    """The output tokens, each boxed in the colour of the step (forward pass) that committed it."""
    fig = go.Figure()
    col = row = 0
    xs, ys, texts, hovers, colors = [], [], [], [], []
    for st in trace.steps if upto is None else trace.steps[: upto + 1]:
        for j, text in enumerate(st.texts):
            if col == per_line or (text.startswith("\n") and col):
                col, row = 0, row + 1
            xs.append(col)
            ys.append(-row)
            texts.append(repr(text)[1:-1][:10] or "␣")
            hovers.append(f"step {st.index}, token {j + 1} of {st.accepted}")
            colors.append(STEP_COLORS[st.index % len(STEP_COLORS)])
            col += 1
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=texts,
            hovertext=hovers,
            hoverinfo="text",
            marker={"symbol": "square", "size": 44 if slide else 34, "color": colors},
            textfont={"size": 14 if slide else 11},
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-0.6, per_line - 0.4])
    fig.update_yaxes(visible=False, range=[-row - 0.6, 0.6])
    return apply(fig, "Tokens coloured by the step that produced them", slide, height=90 + 40 * (row + 1))


def steps_figure(
    trace: Trace,
    baseline: Trace | None,
    slide: bool = False,
    upto: int | None = None,
    title: str = "Tokens per step and the running speedup",
) -> go.Figure:
    """Per step: tokens committed (A) as bars in the method's colour, and the running speedup over plain
    decoding on the same prompt (`compare.running_speedup`, ending at `measure.speedup`); steps 0…upto only."""
    steps = trace.steps[: None if upto is None else upto + 1]
    idx = [st.index for st in steps]
    fig = go.Figure(
        go.Bar(
            x=idx, y=[st.accepted for st in steps], name="tokens this step (A)", marker_color=method_color(trace.method)
        )
    )
    if baseline is not None:
        speed = [round(x, 3) for x in running_speedup(baseline, trace, upto)]
        fig.add_trace(
            go.Scatter(
                x=idx,
                y=speed,
                name="running speedup vs AR",
                yaxis="y2",
                mode="lines",
                line={"color": VERIFY, "width": 3},
            )
        )
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": "speedup ×", "rangemode": "tozero"})
    fig.update_xaxes(title="step (one target forward pass)")
    fig.update_layout(yaxis={"title": "tokens committed", "rangemode": "tozero"})  # y2 keeps its own title
    return apply(fig, title, slide, height=340)


def budget_figure(
    budgets: list[int], predicted: list[float], measured: list[float], current: int | None = None, slide: bool = False
) -> go.Figure:
    """Predicted 1 + E[L] (from calibration) against measured A, as the tree budget grows."""
    fig = go.Figure(
        [
            go.Scatter(
                x=budgets,
                y=predicted,
                name="predicted 1 + E[L]",
                mode="lines+markers",
                line={"dash": "dash", "color": NEUTRAL},
            ),
            go.Scatter(
                x=budgets,
                y=measured,
                name="measured A",
                mode="lines+markers",
                line={"color": method_color("medusa"), "width": 3},
            ),
        ]
    )
    if current is not None:
        fig.add_vline(x=current, line={"color": DRAFT, "dash": "dot"}, annotation_text=f"B = {current}")
    fig.update_xaxes(title="tree budget B (drafted nodes)")
    fig.update_yaxes(title="tokens per step", rangemode="tozero")
    return apply(fig, "Predicted vs measured tokens per step", slide, height=340)


def cost_figure(
    sizes: list[int],
    draft_ms: list[float],
    verify_ms: list[float],
    ar_ms: float,
    speedup: list[float] | None = None,
    slide: bool = False,
) -> go.Figure:
    """Draft + verify time of one step against tree size, with plain decoding's step as the yardstick."""
    fig = go.Figure(
        [
            go.Bar(x=sizes, y=verify_ms, name="verify (tree forward)", marker_color=VERIFY),
            go.Bar(x=sizes, y=draft_ms, name="draft (heads)", marker_color=DRAFT),
        ]
    )
    fig.add_hline(
        y=ar_ms,
        line={"color": method_color("ar"), "dash": "dash"},
        annotation_text=f"plain decoding step {ar_ms:.0f} ms",
    )
    if speedup:
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=speedup,
                name="speedup A/r",
                yaxis="y2",
                mode="lines+markers",
                line={"color": ACCEPT, "width": 3},
            )
        )
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": "speedup ×", "rangemode": "tozero"})
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="tree budget B (drafted nodes)")
    fig.update_layout(yaxis={"title": "ms per step"})  # y2 keeps its own title
    return apply(fig, "Step cost against tree size", slide, height=340)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """A Medusa trace's own figures, for export: the busiest step's tree and mask, and the token strip."""
    steps = [st for st in trace.steps if st.detail is not None]
    out = {"tokens": token_strip(trace, slide=True)}
    if steps:
        best = max(steps, key=lambda st: (st.accepted, -st.index))
        parents, labels, status, hover = step_tree_data(best)
        out["tree"] = tree_figure(parents, labels, status, hover, f"Candidate tree, step {best.index}", slide=True)
        out["mask"] = mask_figure(parents, labels, best.detail.path, "Tree-attention mask", slide=True)
    return out
