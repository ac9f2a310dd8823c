"""A drafter with an n-gram pool beside it (EAGLE-2 + n-grams, Medusa + Lookahead): each step's committed tokens by
who proposed them, drawn from the trace."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import HybridDetail, MedusaLookaheadDetail
from specviz.core.trace import Trace
from specviz.output.viz.theme import LEGEND_BELOW, NEUTRAL, apply, method_color

# who proposed a committed token: the target itself (the root), the head, head and pool alike, the pool's
# n-gram grafted onto the head's tree, or the pool's chain verified alone on a copy step
ORIGINS = ("target", "head", "both", "pool", "copy")
LABELS = {
    "target": "the target's own token (root)",
    "head": "the head's draft",
    "both": "head and pool alike",
    "pool": "the pool's n-gram, in the head's tree",
    "copy": "the pool's copy, verified alone (no head)",
}
COLORS = {
    "target": NEUTRAL,
    "head": method_color("eagle"),
    "both": "#44aa99",
    "pool": method_color("pld"),
    "copy": method_color("hybrid"),
}


def origins(trace: Trace) -> list[dict[str, int]]:
    """Per step, how many of its committed tokens came from each origin (they add up to the step's tokens)."""
    rows = []
    for st in trace.steps:
        row: dict[str, int] = dict.fromkeys(ORIGINS, 0)
        row["target"] = min(1, st.accepted)
        d = st.detail
        if isinstance(d, (HybridDetail, MedusaLookaheadDetail)):  # each node's proposer, the root's first
            copy = isinstance(d, HybridDetail) and d.copy
            for src in [d.sources[n] for n in d.path[1:]][: st.drafts_accepted]:  # clipped at EOS or the budget
                row["copy" if copy else src] += 1
        rows.append(row)
    return rows


def origins_figure(trace: Trace, slide: bool = False) -> go.Figure:
    """Stacked bars, one per step: the committed tokens by who proposed them; copy steps stand out."""
    rows = origins(trace)
    steps = list(range(len(rows)))
    heads = any(isinstance(st.detail, MedusaLookaheadDetail) for st in trace.steps)  # Medusa's heads, not EAGLE's
    medusa = {"head": "Medusa's heads", "both": "heads and pool alike", "pool": "the pool's n-gram, in the heads' tree"}
    labels = LABELS | (medusa if heads else {})
    colors = COLORS | ({"head": method_color("medusa")} if heads else {})
    fig = go.Figure()
    for origin in ORIGINS:
        ys = [r[origin] for r in rows]
        if not any(ys):
            continue
        fig.add_trace(
            go.Bar(
                x=steps,
                y=ys,
                name=labels[origin],
                marker_color=colors[origin],
                hovertemplate=f"step %{{x}}: %{{y}} token(s) from {labels[origin]}<extra></extra>",
            )
        )
    copies = [st for st in trace.steps if isinstance(st.detail, HybridDetail) and st.detail.copy]
    share = sum(st.accepted for st in copies) / max(1, sum(st.accepted for st in trace.steps))
    drafted = sum(r["head"] + r["both"] + r["pool"] for r in rows)
    pooled = sum(r["both"] + r["pool"] for r in rows)
    sub = (
        f"{pooled} of the {drafted} drafted tokens committed were the pool's (alone or with the heads')"
        if heads
        else f"{len(copies)} of {len(rows)} steps were copy steps, committing {share:.0%} of the tokens"
        if copies
        else "no copy step: the pool's n-grams only joined the head's trees"
    )
    fig.update_layout(barmode="stack", bargap=0.15, legend=LEGEND_BELOW)
    fig.update_xaxes(title="step (one target forward each)")
    tallest = max((st.accepted for st in trace.steps), default=1)
    fig.update_yaxes(title="tokens committed", dtick=1 if tallest <= 8 else None)
    title = f"Who proposed each committed token<br><sup>{sub} · A = {trace.mean_accepted:.2f}</sup>"
    return apply(fig, title, slide, 400)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """EAGLE's figures of the busiest step (its tree rings the pool's nodes), and who proposed each token."""
    from specviz.output.viz.eagle import gallery as eagle_gallery

    return {**eagle_gallery(trace), "origins": origins_figure(trace, slide=True)}
