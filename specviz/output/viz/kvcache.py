"""The target's KV cache after one chain step with a rejection: the rows kept, the rows rolled back, and where
the next token (the residual's draw, or the bonus token) goes; drawn from a real step's trace record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from specviz.core.trace import StepTrace, Trace
from specviz.output.viz.theme import ACCEPT, REJECT, VERIFY, add_key, apply, token_text

STATES = {  # state -> (fill, what the legend says)
    "cache": ("#e5e7eb", "in the cache before this step"),
    "root": (VERIFY, "written by this pass, kept: the step's first token"),
    "kept": (ACCEPT, "written by this pass, kept: accepted drafts"),
    "rolled": (REJECT, "written by this pass, rolled back (cache cropped)"),
    "next": ("#ffffff", "the next token: no row yet, written by the next pass"),
}


@dataclass(frozen=True)
class Cell:
    position: int
    text: str
    state: str  # a key of STATES


def cells(trace: Trace, step: StepTrace, before: int = 3) -> list[Cell]:
    """The step's rows: a few cached ones before it, its root, accepted and rejected drafts, then the next token."""
    start = len(trace.prompt_ids) + sum(s.accepted for s in trace.steps[: step.index])
    said = [t for s in trace.steps[: step.index] for t in s.texts]  # the output so far, token by token
    earlier = {len(trace.prompt_ids) + i: t for i, t in enumerate(said)}
    texts = {}
    for r in getattr(step.detail, "records", []):
        texts[r["pos"]] = r.get("text", str(r["token"]))
    drafts = list(getattr(step.detail, "drafts", []))
    out = [Cell(p, earlier.get(p, "(prompt)"), "cache") for p in range(max(0, start - before), start)]
    out.append(Cell(start, step.texts[0] if step.texts else "", "root"))
    for i, tok in enumerate(drafts):
        state = "kept" if i < step.drafts_accepted else "rolled"
        out.append(Cell(start + 1 + i, texts.get(i, f"#{tok}"), state))
    after = trace.steps[step.index + 1] if step.index + 1 < len(trace.steps) else None
    if after is not None and after.texts:
        out.append(Cell(start + 1 + step.drafts_accepted, after.texts[0], "next"))
    return out


def _cell(fig: go.Figure, x: int, c: Cell) -> None:
    """One cache row: a box in its state's colour, the token inside, its position below."""
    line = {"color": "#111827", "width": 2, "dash": "dash" if c.state == "next" else "solid"}
    fig.add_shape(type="rect", x0=x - 0.45, x1=x + 0.45, y0=0, y1=1, fillcolor=STATES[c.state][0], line=line)
    color = "white" if c.state in ("root", "kept", "rolled") else "#111827"
    fig.add_annotation(x=x, y=0.5, text=token_text(c.text, 7), showarrow=False, font={"size": 22, "color": color})
    fig.add_annotation(x=x, y=-0.12, text=f"pos {c.position}", showarrow=False, font={"size": 16})


def kv_figure(rows: Sequence[Cell], root_from: str, index: int) -> go.Figure:
    """One cell per cache row (position below, token inside), coloured by what happened to it."""
    fig = go.Figure()
    for i, c in enumerate(rows):
        _cell(fig, i, c)
    next_at = next((i for i, c in enumerate(rows) if c.state == "next"), None)
    if next_at is not None:
        first_rolled = next((i for i, c in enumerate(rows) if c.state == "rolled"), next_at)
        source = "the residual" if root_from == "residual" else "p (the bonus token)"
        where = {"xref": "x", "yref": "y", "axref": "x", "ayref": "y"}
        side = "right" if first_rolled > len(rows) / 2 else "left"  # the label runs toward the figure's middle
        fig.add_annotation(x=next_at, y=1.0, ax=first_rolled, ay=1.55, text=f"next token: from {source}",
                           showarrow=True, arrowhead=3, arrowwidth=2, font={"size": 20}, xanchor=side,
                           **where)  # fmt: skip
    add_key(fig, [(said, fill) for fill, said in STATES.values()])
    fig.update_xaxes(visible=False, range=[-0.8, len(rows) - 0.2])
    fig.update_yaxes(visible=False, range=[-0.3, 1.75])
    return apply(fig, f"Step {index}: the target's KV cache after the verify pass and the rejection", height=360)
