"""Tree figures: the candidate tree (a tidy tree), the tree-attention mask, Medusa's tree size and cost.

`tree_figure` and `mask_figure` take plain parents + labels/status (any tree method); viz.steps' views re-exported.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.core.details import MedusaDetail
from specviz.core.trace import StepTrace, Trace
from specviz.output.viz.steps import steps_figure, token_strip
from specviz.output.viz.theme import (
    ACCEPT,
    DRAFT,
    NEUTRAL,
    REJECT,
    SLIDE_SIZE,
    VERIFY,
    add_key,
    add_speedup,
    apply,
    bands,
    method_color,
    tint,
    token_text,
)

__all__ = [
    "budget_figure",
    "cost_figure",
    "dfs_order",
    "gallery",
    "label_positions",
    "leaf_count",
    "mask_figure",
    "step_tree_data",
    "steps_figure",
    "token_strip",
    "tree_figure",
    "tree_layout",
    "tree_sizes",
]

STATUS_COLORS = {"accepted": ACCEPT, "rejected": REJECT, "passed": DRAFT, "unreached": NEUTRAL}
# mask cell codes 0..2: masked, visible, visible on the accepted path
MAX_MASK = 129  # nodes of a mask drawn: Medusa's largest tree; beyond, n² cells are unreadable and slow to render
SEEN = tint(VERIFY, 0.4)  # a visible cell: the target attends there
MASK_SCALE = bands("#f1f5f9", SEEN, ACCEPT)


def dfs_order(parents: list[int]) -> list[int]:
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
    """A tidy tree: depth on x (root on the left), leaves one unit apart in depth-first order (first child on
    top), each parent centred over its first and last child, so no edges cross and subtrees stay together."""
    kids: list[list[int]] = [[] for _ in parents]
    for i, p in enumerate(parents[1:], start=1):
        kids[p].append(i)
    depth = [0] * len(parents)
    y: dict[int, float] = {}
    leaf = 0
    for i in dfs_order(parents):
        if i:
            depth[i] = depth[parents[i]] + 1
        if not kids[i]:
            y[i] = -float(leaf)
            leaf += 1
    for i in reversed(dfs_order(parents)):  # children before their parent
        if kids[i]:
            y[i] = (y[kids[i][0]] + y[kids[i][-1]]) / 2
    top = (leaf - 1) / 2  # centre the tree on y = 0
    return {i: (float(depth[i]), y[i] + top) for i in range(len(parents))}


def leaf_count(parents: list[int]) -> int:
    has_kids = {p for p in parents if p >= 0}
    return sum(1 for i in range(len(parents)) if i not in has_kids)


def label_positions(parents: list[int]) -> list[str]:
    """Where each node's label goes: the root's left of it, a leaf's right of it, an inner node's above it (between
    the subtrees); in a chain (one row, as a copy) inner labels alternate above and below, never overprinting."""
    has_kids = {p for p in parents if p >= 0}
    chain = len(has_kids) == len(parents) - 1 and len(set(parents)) == len(parents)  # every node has ≤ 1 child
    inner = ["top center", "bottom center"] if chain else ["top center"] * 2
    return ["middle left" if i == 0 else inner[i % 2] if i in has_kids else "middle right" for i in range(len(parents))]


def tree_sizes(parents: list[int], slide: bool) -> tuple[int, int, int]:
    """(figure height, label font size, marker size): a row of height for every leaf, so labels never overlap;
    on a slide the height is fixed, so the type shrinks with the number of leaves instead."""
    leaves = max(1, leaf_count(parents))
    if slide:
        row = (SLIDE_SIZE[1] - 150) / leaves
        return SLIDE_SIZE[1], int(max(9, min(20, 0.7 * row))), int(max(8, min(22, 0.8 * row)))
    return min(1600, max(320, 24 * leaves + 130)), 13, 14


def tree_figure(
    parents: list[int],
    labels: list[str],
    status: list[str],
    hover: list[str] | None = None,
    title: str | None = None,
    slide: bool = False,
) -> go.Figure:
    """Draw a token tree as a tidy tree: nodes coloured by status (accepted first in the legend), every node
    labelled with its token (cut with an ellipsis, the full text on hover), the accepted path thick and green."""
    pos = tree_layout(parents)
    height, font, marker = tree_sizes(parents, slide)
    where = label_positions(parents)
    fig = go.Figure(_edge_traces(parents, status, pos))
    for rank, (name, color) in enumerate(STATUS_COLORS.items()):
        idx = [i for i, s in enumerate(status) if s == name]
        if not idx:
            continue
        fig.add_trace(
            go.Scatter(
                x=[pos[i][0] for i in idx],
                y=[pos[i][1] for i in idx],
                mode="markers+text",
                name=name,
                legendrank=rank + 1,
                text=[_cut(labels[i]) for i in idx],
                textposition=[where[i] for i in idx],
                textfont={"size": font, "color": "#0f172a" if name != "unreached" else "#64748b", "shadow": "auto"},
                marker={"size": marker, "color": color, "line": {"color": "white", "width": 1}},
                hovertext=[(hover or labels)[i] for i in idx],
                hoverinfo="text",
                cliponaxis=False,  # the root's label may run into the left margin on a narrow column
            )
        )
    depth = max(x for x, _ in pos.values())
    ys = [y for _, y in pos.values()]
    fig.update_xaxes(visible=False, range=[-0.45, depth + 0.75])  # room for the root's label and the leaves'
    fig.update_yaxes(visible=False, range=[min(ys) - 0.7, max(ys) + 0.9])
    return apply(fig, title, slide, height=height)


def _cut(label: str, limit: int = 12) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _edge_traces(parents: list[int], status: list[str], pos: dict[int, tuple[float, float]]) -> list[go.Scatter]:
    """One line per edge; thick and green where both ends were accepted."""
    out = []
    for i, p in enumerate(parents):
        if p < 0:
            continue
        on_path = status[i] == "accepted" and status[p] == "accepted"
        out.append(
            go.Scatter(
                x=[pos[p][0], pos[i][0]],
                y=[pos[p][1], pos[i][1]],
                mode="lines",
                line={"color": ACCEPT if on_path else "#cbd5e1", "width": 5 if on_path else 1.5},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    return out


def mask_figure(
    parents: list[int], labels: list[str], path: list[int], title: str | None = None, slide: bool = False
) -> go.Figure:
    """Tree-attention mask: row i may attend column j (its ancestors and itself); accepted path darker."""
    if (n := len(parents)) > MAX_MASK:  # refused before the n x n grid is allocated
        return apply(go.Figure(), f"{n} nodes: too many to draw their mask (at most {MAX_MASK})", slide)
    z = _ancestor_grid(parents, path)
    # its position id: the root's + its depth, the number of its ancestors (the cells its row sees, less itself)
    ticks = [f"{i}:{_cut(labels[i], 10)} p+{sum(v > 0 for v in z[i]) - 1}" for i in range(n)]
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
            colorscale=MASK_SCALE,
            hovertemplate="query %{y}<br>key %{x}<br>%{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="query node, position id", tickfont={"size": 10 if n > 24 else 12})
    fig.update_xaxes(
        title="key node; the prefix is always visible", tickangle=-60, tickfont={"size": 10 if n > 24 else 12}
    )
    add_key(fig, [("masked", "#f1f5f9"), ("sees: an ancestor or itself", SEEN), ("sees, on the accepted path", ACCEPT)])
    fig.update_xaxes(showgrid=False).update_yaxes(showgrid=False)  # the key's traces bring the template's grid
    return apply(fig, title, slide, height=max(360, 24 * n + 160))


def _ancestor_grid(parents: list[int], path: list[int]) -> list[list[int]]:
    """z[i][j]: 1 where node j is node i or an ancestor of it, 2 where both are on the accepted path, else 0."""
    n, on_path = len(parents), set(path)
    z = [[0] * n for _ in range(n)]
    for i in range(n):
        j = i
        while j >= 0:
            z[i][j] = 2 if i in on_path and j in on_path else 1
            j = parents[j]
    return z


def step_tree_data(step: StepTrace) -> tuple[list[int], list[str], list[str], list[str]]:
    """(parents, labels, status, hover) of a Medusa (or Hydra) step's tree; Hydra's hover names what each head read."""
    detail = step.detail_as(MedusaDetail)
    nodes: list[dict[str, Any]] = detail.nodes
    labels = [token_text(n["text"]) for n in nodes]
    hover = []
    for i, n in enumerate(nodes):
        if i == 0:
            hover.append(f"root {n['text']!r}: the target's own token")
            continue
        reads = f"<br>head read: {' '.join(repr(t) for t in n['reads'])}" if n.get("reads") else ""
        if n["rank"] is None:  # a pooled n-gram's node (Medusa + Lookahead): no head proposed it
            who = f"from the n-gram pool, depth {n['head']}<br>target p = {n['target_prob']:.3f}"
        else:
            who = f"head {n['head']}, rank {n['rank'] + 1}{reads}<br>"
            who += f"head p = {n['head_prob']:.3f}, target p = {n['target_prob']:.3f}"
        hover.append(f"node {i} {n['text']!r}<br>{who}<br>{n['status']}: {n['reason']}")
    return detail.parents, labels, [n["status"] for n in nodes], hover


def budget_figure(
    sizes: list[int], predicted: list[float], measured: list[float], current: int | None = None, slide: bool = False
) -> go.Figure:
    """Predicted 1 + E[L] (from calibration) against measured A, as the tree grows (total_tokens, root included)."""
    fig = go.Figure(
        [
            go.Scatter(
                x=sizes,
                y=predicted,
                name="predicted 1 + E[L]",
                mode="lines+markers",
                line={"dash": "dash", "color": NEUTRAL},
            ),
            go.Scatter(
                x=sizes,
                y=measured,
                name="measured A",
                mode="lines+markers",
                line={"color": method_color("medusa"), "width": 3},
            ),
        ]
    )
    if current is not None:
        fig.add_vline(x=current, line={"color": DRAFT, "dash": "dot"}, annotation_text=f"{current} tokens")
    fig.update_xaxes(title="tree size: total_tokens (root included)")
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
        add_speedup(fig, sizes, speedup, "speedup A/r", ACCEPT, mode="lines+markers")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="tree size: total_tokens (root included)")
    fig.update_layout(yaxis={"title": "ms per step"})  # y2 keeps its own title
    return apply(fig, "Step cost against tree size", slide, height=340)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """A Medusa trace's own figures, for export: the busiest step's tree and mask, and the token strip."""
    out = {"tokens": token_strip(trace, slide=True)}
    if (found := busiest(trace)) is not None:
        best, detail = found
        parents, labels, _status, _hover = step_tree_data(best)
        out["tree"] = busiest_tree(trace, slide=True)
        out["mask"] = mask_figure(parents, labels, detail.path, "Tree-attention mask", slide=True)
    return out


def busiest(trace: Trace) -> tuple[StepTrace, MedusaDetail] | None:
    """The heads tree's step that committed most (the earliest of equals) and its record; None without one."""
    steps = trace.detailed(MedusaDetail)
    return max(steps, key=lambda sd: (sd[0].accepted, -sd[0].index)) if steps else None


def busiest_tree(trace: Trace, title: str | None = None, slide: bool = False) -> go.Figure:
    """The tree of the step that committed most (the earliest of equals), titled with its step and, where a pool
    joined the heads' tree, how many of its nodes the pool proposed."""
    if (found := busiest(trace)) is None:
        return apply(go.Figure(), title or "No drafted steps yet", slide)
    best, detail = found
    pooled = sum(n["rank"] is None for n in detail.nodes[1:])
    pool = f": {pooled} node{'s' if pooled > 1 else ''} from the n-gram pool (ringed)" if pooled else ""
    head = title or f"Candidate tree, step {best.index}{pool}"
    fig = tree_figure(*step_tree_data(best), head, slide=slide)
    if pooled:  # the pool's nodes ringed: the two proposers apart at a glance
        pos, (_h, _f, marker) = tree_layout(detail.parents), tree_sizes(detail.parents, slide)
        ringed = [i for i, n in enumerate(detail.nodes) if i and n["rank"] is None]
        ring = method_color("pld")  # the pool's colour in the who-proposed bars
        fig.add_trace(
            go.Scatter(
                x=[pos[i][0] for i in ringed],
                y=[pos[i][1] for i in ringed],
                mode="markers",
                name="from the n-gram pool",
                marker={"size": marker + 10, "color": "rgba(0,0,0,0)", "line": {"color": ring, "width": 3}},
                hoverinfo="skip",
            )
        )
    return fig
