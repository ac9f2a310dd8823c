"""DFlash's figures, drawn from its steps' records: each block as drafted in one pass (a row of positions, the
drafter's confidence in each, which ones the target kept), and what each block position earns over a run."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import DFlashDetail, Eagle3Detail
from specviz.core.trace import Trace
from specviz.output.viz.steps import token_squares, token_strip
from specviz.output.viz.theme import ACCEPT, DRAFT, NEUTRAL, REJECT, VERIFY, apply, token_text
from specviz.output.viz.why import split

KEPT, MISSED, AFTER = ("kept by the target", ACCEPT), ("the target's token differed", REJECT), ("after a miss", NEUTRAL)


def blocks(trace: Trace, last: int = 10) -> list[tuple[int, DFlashDetail]]:
    """The last `last` steps' (index, record), oldest first."""
    return [(s.index, d) for s, d in trace.detailed(DFlashDetail)[-last:]]


def block_figure(trace: Trace, last: int = 10, title: str | None = None, slide: bool = False) -> go.Figure:
    """One row per step: the block's drafts by position (1 … block - 1), each cell's text its token and its
    colour the target's verdict; hover gives the drafter's confidence."""
    rows = blocks(trace, last)
    if not rows:
        return apply(go.Figure(), title or "No DFlash steps yet", slide)
    fig = go.Figure()
    for (label, colour), pick in ((KEPT, 0), (MISSED, 1), (AFTER, 2)):
        xs, ys, texts, hover = [], [], [], []
        for index, d in rows:
            for i, (text, conf) in enumerate(zip(d.texts, d.conf, strict=True)):
                state = 0 if i < d.n_accepted else 1 if i == d.n_accepted else 2
                if state == pick:
                    xs.append(i + 1)
                    ys.append(f"step {index}")
                    texts.append(token_text(text, 5))
                    hover.append(f"{token_text(text)!s} · drafter {conf:.0%}")
        if xs:
            fig.add_trace(token_squares(xs, ys, texts, colour, 44, 11, name=label, hovertext=hover, hoverinfo="text"))
    order = [f"step {index}" for index, _d in rows]  # the steps in decoding order, whichever verdict drew first
    fig.update_yaxes(
        autorange="reversed", type="category", categoryorder="array", categoryarray=order,
        title="step (one drafter pass, one target pass)",
    )  # fmt: skip
    width = max(len(d.drafts) for _i, d in rows)
    fig.update_xaxes(title="block position (1 = the token after the root)", range=[0.4, width + 0.6], dtick=1)
    head = title or f"Each block drafted in one pass: {sum(d.n_accepted for _i, d in rows)} drafts kept"
    return apply(fig, head, slide, height=160 + 58 * len(rows))


def position_rates(trace: Trace) -> list[dict]:
    """Per block position: how often it was drafted, how often the target kept it, and the drafter's mean
    confidence there (a position counts as reached when every earlier one was kept)."""
    out: list[dict] = []
    for _s, d in trace.detailed(DFlashDetail):
        for i, conf in enumerate(d.conf):
            while len(out) <= i:
                out.append({"position": len(out) + 1, "drafted": 0, "reached": 0, "kept": 0, "conf": 0.0})
            row = out[i]
            row["drafted"] += 1
            row["conf"] += conf
            row["reached"] += i <= d.n_accepted
            row["kept"] += i < d.n_accepted
    for row in out:
        row["conf"] = row["conf"] / row["drafted"]
    return out


def position_figure(trace: Trace, title: str | None = None, slide: bool = False) -> go.Figure:
    """Bars: the share of steps whose block was kept up to each position; a line: the drafter's mean confidence
    there. The drafter guesses every position at once, so its confidence falls with the distance from the root."""
    rows = position_rates(trace)
    if not rows:
        return apply(go.Figure(), title or "No DFlash steps yet", slide)
    x = [r["position"] for r in rows]
    kept = [r["kept"] / r["drafted"] for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=kept, name="kept (share of blocks)", marker_color=ACCEPT,
                         text=[f"{k:.0%}" for k in kept], textposition="outside"))  # fmt: skip
    fig.add_trace(go.Scatter(x=x, y=[r["conf"] for r in rows], name="drafter's confidence (mean)",
                             mode="lines+markers", line={"color": DRAFT, "width": 3}))  # fmt: skip
    fig.update_yaxes(title="share", range=[0, 1.12], tickformat=".0%")
    fig.update_xaxes(title="block position", dtick=1)
    n = len(trace.detailed(DFlashDetail))
    return apply(fig, title or f"What each block position earns ({n} blocks)", slide, height=420)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """A DFlash trace's own figures, for export: its tokens, its last blocks and what each position earns."""
    return {
        "tokens": token_strip(trace, slide=True),
        "blocks": block_figure(trace, slide=True),
        "positions": position_figure(trace, slide=True),
    }


def pass_words(n: float) -> str:
    """'1 drafter pass a step', '2 drafter passes a step', '1.9 drafter passes a step' (a mean over steps)."""
    return f"{n:.2g} drafter pass{'' if n == 1 else 'es'} a step"


def drafting_figure(eagle3: Trace, dflash: Trace, title: str | None = None, slide: bool = False) -> go.Figure:
    """Each method's mean step split (drafting, the target's pass, the rest, in ms) with how many drafter passes
    a step ran: EAGLE-3's head once per draft round, DFlash's drafter once."""
    rows = []
    for name, trace in (("eagle3", eagle3), ("dflash", dflash)):
        part = split(trace)  # the step split the lesson's narration reads (viz.why)
        if name == "eagle3":
            depths = [max(d.tree["depth"], default=0) for _s, d in trace.detailed(Eagle3Detail)]
            passes = sum(depths) / max(1, len(depths))
        else:
            passes = 1.0
        rows.append((name, part["draft"], part["verify"], part["other"], passes, trace.mean_accepted))
    labels = [f"{'EAGLE-3' if r[0] == 'eagle3' else 'DFlash'}<br>{pass_words(r[4])} · A {r[5]:.2f}" for r in rows]
    fig = go.Figure()
    for j, (part, colour) in enumerate((("drafting", DRAFT), ("the target's pass", VERIFY), ("the rest", NEUTRAL))):
        vals = [r[1 + j] for r in rows]
        fig.add_trace(go.Bar(y=labels, x=vals, name=part, orientation="h", marker_color=colour,
                             text=[f"{v:.1f}" for v in vals], textposition="inside"))  # fmt: skip
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="ms per step (mean)")
    return apply(fig, title or "Drafting: EAGLE-3's rounds against DFlash's one pass", slide, height=320)
