"""Where each method wins: the measured speedup by kind of prompt (from a bench result), each kind's winner marked."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from specviz.output.viz.theme import apply

# below 1× orange, 1× white, above 1× purple: a diverging scale that reads under the common colour-vision deficiencies
SCALE = [[0.0, "#e66101"], [0.5, "#f7f7f7"], [1.0, "#5e3c99"]]


def method_order(bench: dict[str, Any]) -> list[str]:
    """The methods of a bench result other than plain decoding, fastest overall first."""
    summary = bench.get("methods", {})
    names = [m for m in summary if m != "ar"]
    return sorted(names, key=lambda m: -float(summary[m].get("speedup", 0.0)))


def winners(bench: dict[str, Any]) -> dict[str, tuple[str, float]]:
    """Per category, the method with the highest measured speedup and that speedup."""
    out = {}
    for cat, speeds in bench.get("categories", {}).items():
        ranked = sorted(((v, m) for m, v in speeds.items() if m != "ar"), reverse=True)
        if ranked:
            out[cat] = (ranked[0][1], float(ranked[0][0]))
    return out


def _subtitle(bench: dict[str, Any], where: str) -> str:
    """Two lines: what was run, then where and when."""
    per = bench.get("prompts", 0) / max(1, len(bench.get("categories", {})))
    repeats = bench.get("repeats", 1)
    runs = f"median of {repeats} interleaved runs" if repeats > 1 else "one run each"
    setting = (
        f"{bench.get('prompts', '?')} prompts (about {per:.0f} per kind), {bench.get('max_new_tokens', '?')} new "
        f"tokens, T = {bench.get('temperature', 0)}, {runs}"
    )
    return f"{setting}<br>{where}" if where else setting


TICKS = [0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8]


def _heatmap(
    speed: list[list[float | None]], cats: list[str], names: list[str], best: dict, labels: dict[str, str]
) -> go.Heatmap:
    """The speedup cells, coloured by log2(speedup) and marked ★ where a method is its row's fastest."""
    text = [
        [
            "" if v is None else ("★ " if best.get(c, ("",))[0] == m else "") + f"{v:.2f}×"
            for m, v in zip(names, row, strict=True)
        ]
        for c, row in zip(cats, speed, strict=True)
    ]
    z = [[None if v is None else math.log2(max(v, 1e-3)) for v in row] for row in speed]
    top = max([abs(v) for row in z for v in row if v is not None] + [math.log2(1.25)])
    ticks = [t for t in TICKS if abs(math.log2(t)) <= top + 1e-9]
    return go.Heatmap(
        z=z,
        x=names,
        y=[labels.get(c, c) for c in cats],
        text=text,
        customdata=speed,
        texttemplate="%{text}",
        textfont={"size": 15},
        colorscale=SCALE,
        zmid=0.0,
        zmin=-top,
        zmax=top,
        xgap=2,
        ygap=2,
        colorbar={
            "title": {"text": "speedup"},
            "tickvals": [math.log2(t) for t in ticks],
            "ticktext": [f"{t:g}×" for t in ticks],
        },
        hovertemplate="%{x} on %{y}: %{customdata:.2f}× plain decoding<extra></extra>",
    )


def wins_figure(
    bench: dict[str, Any], where: str = "", labels: dict[str, str] | None = None, slide: bool = False
) -> go.Figure:
    """Heatmap of speedup over plain decoding, kinds of prompt × methods; ★ marks each kind's fastest method.

    `bench` is a bench result (`python -m specviz bench --json`: "methods", "categories", settings); `labels`
    maps category names to display names and, when given, sets the row order; `where` says where and when.
    Colour is log2(speedup), so 2× and 0.5× are equally far from 1×.
    """
    cats = [c for c in (labels or {}) if c in bench["categories"]] or list(bench["categories"])
    names = method_order(bench)
    speed = [[bench["categories"][c].get(m) for m in names] for c in cats]
    fig = go.Figure(_heatmap(speed, cats, names, winners(bench), labels or {}))
    fig.update_yaxes(autorange="reversed", title=None)
    fig.update_xaxes(title="method (fastest overall on the left)")
    title = f"Where each method wins: speedup by kind of prompt<br><sup>{_subtitle(bench, where)}</sup>"
    fig = apply(fig, title, slide=slide, height=140 + 44 * len(cats) + 60)
    fig.update_layout(margin={"t": 150 if slide else 110})
    return fig
