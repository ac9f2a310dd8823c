"""The Jacobi convergence grid: iterations down, output positions across, each cell its guessed token."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.core.details import JacobiDetail
from specviz.core.trace import Trace
from specviz.output.viz.steps import token_squares
from specviz.output.viz.theme import ACCEPT, DRAFT, NEUTRAL, VERIFY, apply, token_text

# status -> (code, colour, legend text)
STATUS = {
    "done": (0, "#e5e7eb", "committed earlier"),
    "init": (1, NEUTRAL, "initial guess"),
    "changed": (2, DRAFT, "changed since last pass"),
    "fixed": (3, VERIFY, "same as last pass"),
    "committed": (4, ACCEPT, "committed this pass"),
}


def _show(text: str) -> str:
    """A cell's token, cut to what a 48 px square holds at the projector's 16 px type."""
    return token_text(text, 5)


def grid_rows(trace: Trace, upto: int | None = None, last: int = 12) -> list[dict]:
    """Plain rows of the grid: per iteration, its offset, token texts and cell statuses."""
    steps = trace.steps[: None if upto is None else upto + 1]
    passes = [(s, s.detail) for s in steps if isinstance(s.detail, JacobiDetail)]
    return [
        {"step": s.index, "offset": d.offset, "texts": d.texts, "status": d.status, "accepted": d.n_accepted}
        for s, d in passes[-last:]
    ]


def _cells(rows: list[dict], name: str, lo: int, out: list[str]) -> tuple[list[int], list[str], list[str]]:
    """(x, y, text) of every cell with status `name`; "done" cells are earlier commits left of a row's offset."""
    xs: list[int] = []
    ys: list[str] = []
    texts: list[str] = []
    for r in rows:
        y = f"pass {r['step']}"
        if name == "done":  # tokens committed by earlier passes, left of this row's frontier
            idx = list(range(lo, min(r["offset"], len(out))))  # an offset is a position of the output
            xs, ys, texts = xs + idx, ys + [y] * len(idx), texts + [_show(out[i]) for i in idx]
            continue
        for j, (t, st) in enumerate(zip(r["texts"], r["status"])):
            if st == name:
                xs.append(r["offset"] + j)
                ys.append(y)
                texts.append(_show(t))
    return xs, ys, texts


def _frontier(rows: list[dict]) -> go.Scatter:
    """The committed frontier: a step line just right of each pass's last accepted cell."""
    return go.Scatter(
        x=[r["offset"] + r["accepted"] + 0.5 for r in rows],
        y=[f"pass {r['step']}" for r in rows],
        mode="lines+markers",
        name="committed frontier",
        line={"color": "#111827", "width": 2, "shape": "hv"},
        marker={"symbol": "line-ns", "size": 40, "line": {"width": 3}},
    )


def jacobi_grid_figure(
    trace: Trace, upto: int | None = None, last: int = 12, title: str | None = None, slide: bool = False
) -> go.Figure:
    """Each row one pass: its guesses by output position, coloured changed / fixed / committed."""
    rows = grid_rows(trace, upto, last)
    if not rows:
        return apply(go.Figure(), title or "No Jacobi passes yet", slide)
    lo = rows[0]["offset"]
    hi = max(r["offset"] + len(r["texts"]) for r in rows)
    out = [t for s in trace.steps for t in s.texts]  # output token texts by position
    fig = go.Figure()
    for name, (_code, color, label) in STATUS.items():
        xs, ys, texts = _cells(rows, name, lo, out)
        if xs:
            fig.add_trace(token_squares(xs, ys, texts, color, 48, 11, name=label, hovertext=texts, hoverinfo="text+x"))
    fig.add_trace(_frontier(rows))
    fig.update_yaxes(
        autorange="reversed",
        type="category",
        title="iteration (one forward pass)",
        categoryorder="array",
        categoryarray=[f"pass {r['step']}" for r in rows],
    )
    fig.update_xaxes(title="output position", range=[lo - 0.7, hi - 0.3], dtick=1)
    return apply(fig, title, slide, height=140 + 54 * len(rows))


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """A Jacobi trace's own figure, for export: the convergence grid."""
    return {"grid": jacobi_grid_figure(trace, title="Jacobi iteration: guesses converging")}
