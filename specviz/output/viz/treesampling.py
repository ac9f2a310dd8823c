"""Tree speculative sampling at T > 0 on one real step: the children tried in turn at each depth (each kept with
the target's probability of its token, the head's guess being a point mass), and the residual's draw where every
child failed; drawn from an EAGLE step's trace record."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import EagleDetail
from specviz.core.trace import StepTrace
from specviz.output.viz.theme import ACCEPT, NEUTRAL, REJECT, VERIFY, apply, token_text


def sampling_figure(step: StepTrace) -> go.Figure:
    """One bar per tried child, in the order tried: p of its token (what it is kept with) and the draw u;
    then the token drawn from the residual (or the bonus token) that ends the step."""
    d = step.detail_as(EagleDetail)
    texts, depths = d.tree.get("texts", []), d.tree.get("depth", [])
    tries = d.decisions or []

    def name(k: int, t: dict) -> str:
        """'2. depth 1: ␣not': a decision's node is a position in the verified tree (verify_nodes)."""
        i = d.verify_nodes[t["node"]] if t["node"] < len(d.verify_nodes) else -1
        text = texts[i] if 0 <= i < len(texts) else str(t["token"])
        return f"{k + 1}. depth {depths[i] if 0 <= i < len(depths) else '?'}: {token_text(text, 10)}"

    names = [name(k, t) for k, t in enumerate(tries)]
    colors = [ACCEPT if t["accepted"] else REJECT for t in tries]
    fig = go.Figure()
    fig.add_bar(x=names, y=[t["p"] for t in tries], marker_color=colors, name="kept with p(token | what was rejected)")
    fig.add_scatter(x=names, y=[t["u"] for t in tries], mode="markers", name="the draw u (kept if u < p)",
                    marker={"symbol": "x", "size": 14, "color": "#111827"})  # fmt: skip
    source = "the residual" if d.residual_token is not None else "p (bonus)"
    fig.add_bar(x=["then: the next token"], y=[1.0], marker_color=NEUTRAL, marker_line_color=VERIFY,
                marker_line_width=2, name=f"the step's last token, drawn from {source}", opacity=0.5)  # fmt: skip
    fig.update_yaxes(title="probability", range=[0, 1.08])
    fig.update_xaxes(title="children tried in turn, then the closing draw")
    kept = sum(t["accepted"] for t in tries)
    title = f"Step {step.index}: {len(tries)} children tried, {kept} kept; the next token from {source}"
    return apply(fig, title, height=400)
