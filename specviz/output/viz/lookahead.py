"""Lookahead figures: the 2D window with its harvested n-grams, the pool, the verification branch,
the combined attention mask, and speedup against W (per-step A: viz.tree.steps_figure)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.core.details import LookaheadDetail
from specviz.core.trace import Trace
from specviz.output.viz.theme import ACCEPT, NEUTRAL, REJECT, VERIFY, add_key, apply, bands, method_color, token_text
from specviz.output.viz.tree import MAX_MASK
from specviz.trees.ngram_pool import Layout, NgramPool

# the pool's own events in shades of slate: the role hues (accepted, target, proposed) keep their one meaning
HARVEST_COLORS = {"new": "#0f172a", "refreshed": "#64748b", "evicted": "#cbd5e1"}
LEVEL_COLOR, NEW_COLOR = "#fce7f3", "#fbcfe8"


def _show(text: str) -> str:
    """Token text made visible in a cell (theme.token_text)."""
    return token_text(text, 8)


def window_figure(detail: LookaheadDetail, title: str | None = None, slide: bool = False) -> go.Figure:
    """The (N-1)×W Jacobi window, staggered by position; each harvested n-gram is a column outlined."""
    fig = go.Figure()
    levels = [*detail.window_texts, detail.new_texts]
    names = [f"level {i}" for i in range(len(levels) - 1)] + ["new (this pass)"]
    _add_harvest(fig, detail.harvest_status, names)
    for lv, texts in enumerate(levels):
        fig.add_trace(_level_cells(texts, lv, names[lv], new=lv == len(levels) - 1))
    fig.update_yaxes(autorange="reversed", title=None)
    fig.update_xaxes(title="position after the root (root = 0)", dtick=1)
    if not detail.harvested:
        _note(fig, "the window is still filling: no n-grams yet", y=-0.25)
    return apply(fig, title, slide, height=110 + 70 * len(levels))


def _note(fig: go.Figure, text: str, y: float) -> None:
    """A centred line of text on the figure's paper (a state with nothing to draw yet)."""
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=y)


def _add_harvest(fig: go.Figure, harvest_status: list[str], names: list[str]) -> None:
    """One shaded band down each harvested column, coloured by what the pool did with its n-gram."""
    seen: set[str] = set()
    for col, status in enumerate(harvest_status):
        fig.add_trace(
            go.Scatter(
                x=[col + lv + 1 for lv in range(len(names))],
                y=names,
                mode="lines",
                line={"color": HARVEST_COLORS[status], "width": 26},
                opacity=0.25,
                name=f"n-gram {status}",
                legendgroup=status,
                hoverinfo="skip",
                showlegend=status not in seen,
            )
        )
        seen.add(status)


def _level_cells(texts: list[str], lv: int, name: str, new: bool) -> go.Scatter:
    """One window level as a row of token cells, shifted right by its level."""
    return go.Scatter(
        x=[i + lv + 1 for i in range(len(texts))],
        y=[name] * len(texts),
        mode="markers+text",
        text=[_show(t) for t in texts],
        textfont={"size": 12},
        marker={
            "symbol": "square",
            "size": 44,
            "color": NEW_COLOR if new else LEVEL_COLOR,
            "line": {"color": "#9d174d", "width": 1},
        },
        hovertext=[f"{name}, column {i}: {t!r}" for i, t in enumerate(texts)],
        hoverinfo="text",
        showlegend=False,
    )


def final_pool(trace: Trace) -> list[dict] | None:
    """The n-gram pool as the run ended (recorded on its last step that ran a forward)."""
    done = trace.detailed(LookaheadDetail)
    return done[-1][1].pool_top if done else None


# where an accepted n-gram entered the pool: harvested from the Jacobi window, or put there from the prompt before
# decoding (an option of the reference code; the paper's pool starts empty)
ORIGINS = {"window": "harvested from the window", "prompt": "the prompt's n-grams (seeded)"}


def accepted_origins(trace: Trace) -> dict[str, int]:
    """Lookahead's accepted drafted tokens by where their n-gram entered the pool, the pool replayed from the run's
    record (its config says whether the prompt seeded it); ValueError where the replay disagrees with the run."""
    config = trace.config.get("method", {})
    n, guesses = int(config["ngram"]), max(1, int(config["guesses"]))
    pool, origin = NgramPool(n, guesses), {}
    ids = trace.prompt_ids if config.get("seed_prompt", True) else []
    for i in range(len(ids) - n + 1):
        gram = tuple(ids[i : i + n])
        if pool.add(gram) != "refreshed":
            origin[gram] = "prompt"
    counts = dict.fromkeys(ORIGINS, 0)
    for step in trace.steps:
        d = step.detail
        if not isinstance(d, LookaheadDetail):
            continue
        if d.best >= 0 and d.accepted_tokens:
            counts[origin[(step.committed[0], *d.candidates[d.best])]] += len(d.accepted_tokens)
        for gram, said in zip(d.harvested, d.harvest_status):
            if (status := pool.add(gram)) != said:
                raise ValueError(f"the pool's replay says {status!r} where the run recorded {said!r}")
            if status != "refreshed":
                origin[tuple(gram)] = "window"
    return counts


def _run_label(trace: Trace) -> str:
    seeded = trace.config.get("method", {}).get("seed_prompt", True)
    name = "pool seeded with the prompt" if seeded else "the paper's: pool starts empty"
    return f"{name}<br>A = {trace.mean_accepted:.2f}"


def origins_figure(runs: list[Trace], title: str | None = None, slide: bool = False) -> go.Figure:
    """One bar per run: its accepted drafted tokens by where their n-gram came from, so seeding's share is seen
    beside the paper's algorithm; the counts ride in the layout's meta for the lesson's checks."""
    counts = [accepted_origins(t) for t in runs]
    labels = [_run_label(t) for t in runs]
    colors = {"window": method_color("lookahead"), "prompt": method_color("pld")}
    fig = go.Figure()
    for origin, name in ORIGINS.items():
        ys = [c[origin] for c in counts]
        fig.add_trace(go.Bar(x=labels, y=ys, name=name, marker_color=colors[origin], text=ys, textposition="inside"))
    fig.update_layout(barmode="stack", meta={"origins": counts})
    fig.update_yaxes(title="accepted drafted tokens")
    if title is None:
        title = "Where Lookahead's accepted drafts came from"
    return apply(fig, title, slide, 420)


def pool_figure(pool_top: list[dict], title: str | None = None, slide: bool = False) -> go.Figure:
    """The keys holding most n-grams: one bar per n-gram, its length the times it was accepted."""
    labels, hits, colors = [], [], []
    for entry in pool_top:
        for g in entry["grams"]:
            labels.append(f"{_show(entry['text'])} → {' '.join(_show(t) for t in g['texts'])}")
            hits.append(g["hits"])
            colors.append(ACCEPT if g["hits"] else NEUTRAL)
    fig = go.Figure(
        go.Bar(
            x=[h + 0.05 for h in hits],
            y=labels,
            orientation="h",
            marker_color=colors,
            text=hits,
            textposition="outside",
            hovertext=labels,
            hoverinfo="text+x",
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="times accepted (bars for 0 are stubs)")
    return apply(fig, title, slide, height=120 + 22 * max(1, len(labels)))


# verify cell codes 0..2: not checked, the first mismatch, matched (a role's hue each)
CELL_SCALE = bands(NEUTRAL, REJECT, ACCEPT)


def verify_figure(detail: LookaheadDetail, title: str | None = None, slide: bool = False) -> go.Figure:
    """Each verified candidate a row of cells: matched tokens green, the first mismatch red, the rest unchecked
    grey; a cell spans its position, so a token's text fits it at any type size."""
    cands = detail.candidates
    fig = go.Figure()
    depth = max((len(c) for c in cands), default=1)
    if cands:
        fig.add_trace(_candidate_cells(detail, depth))
        add_key(
            fig, [("matched the target's argmax", ACCEPT), ("the first mismatch", REJECT), ("not checked", NEUTRAL)]
        )
    else:
        _note(fig, "no pooled n-gram starts with this root: only the window ran", y=0.5)
    # rows at most a third of the plot tall, centred: a lone candidate is a strip, not a wall
    pad = max(0, 3 - len(cands)) / 2
    fig.update_yaxes(range=[len(cands) - 0.5 + pad, -0.5 - pad], showgrid=False, zeroline=False)
    fig.update_xaxes(title="position after the root", dtick=1, range=[0.5, depth + 0.5], showgrid=False)
    return apply(fig, title, slide, height=170 + 70 * max(2, len(cands)))


def _candidate_cells(detail: LookaheadDetail, depth: int) -> go.Heatmap:
    """The candidates' cells, coded by CELL_SCALE, a shorter candidate's missing cells left empty."""
    cands, texts, matched = detail.candidates, detail.candidate_texts, detail.matched
    code = [
        [(2 if j < m else 1 if j == m else 0) for j in range(len(c))] + [None] * (depth - len(c))
        for c, m in zip(cands, matched)
    ]
    return go.Heatmap(
        z=code,
        x=list(range(1, depth + 1)),
        y=[
            f"candidate {c + 1} ({m} matched){'  ★ accepted' if c == detail.best else ''}"
            for c, m in enumerate(matched)
        ],
        text=[[_show(t) for t in ctext] + [""] * (depth - len(ctext)) for ctext in texts],
        texttemplate="%{text}",
        textfont={"color": "white"},
        colorscale=CELL_SCALE,
        zmin=-0.5,
        zmax=2.5,
        showscale=False,
        xgap=6,
        ygap=6,
        customdata=[[repr(t) for t in ctext] + [""] * (depth - len(ctext)) for ctext in texts],
        hovertemplate="%{y}, position %{x}: %{customdata}<extra></extra>",
    )


# mask cell codes 0..3: masked, the root, the lookahead branch (in the method's colour), the verification branch
BRANCH = method_color("lookahead")
MASK_SCALE = bands("#ffffff", NEUTRAL, BRANCH, VERIFY)


def mask_figure(layout: dict[str, int], title: str | None = None, slide: bool = False) -> go.Figure:
    """The combined attention mask over one forward's new tokens, branches labelled and shaded apart."""
    lay = Layout(**{k: int(layout.get(k, 0)) for k in ("levels", "width", "cands", "depth")})
    if lay.size > MAX_MASK:  # refused before the size x size grid is allocated
        return apply(go.Figure(), f"{lay.size} tokens: too many to draw their mask (at most {MAX_MASK})", slide)
    split = lay.cand_slot(0, 0)
    z = [
        [0 if not v else 1 if c == 0 else 2 if r < split else 3 for c, v in enumerate(row)]
        for r, row in enumerate(lay.allowed())
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            zmin=0,
            zmax=3,
            colorscale=MASK_SCALE,
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="query %{y} sees key %{x}<extra></extra>",
        )
    )
    ticks, labels = _segments(fig, lay)
    fig.update_xaxes(
        tickvals=ticks, ticktext=labels, tickangle=-45, title="key (may be attended to), position id", showgrid=False
    )
    fig.update_yaxes(tickvals=ticks, ticktext=labels, autorange="reversed", title="query, position id", showgrid=False)
    add_key(  # what each fill means, in the legend below the plot
        fig,
        [
            ("masked: may not attend", "#ffffff"),
            ("root (the last committed token)", NEUTRAL),
            (f"lookahead branch ({lay.levels}×{lay.width} window)", BRANCH),
            (f"verification branch ({lay.cands} n-grams × {lay.depth})", VERIFY),
        ],
    )
    return apply(fig, title, slide, height=560)


def _segments(fig: go.Figure, lay: Layout) -> tuple[list[float], list[str]]:
    """Rule a line across and down at each segment's start; return the segments' tick positions and labels, each
    with its position ids (p: the root's; a window's level and a candidate share ids, as the mask lets them)."""
    ticks, labels, offsets = [], [], [off for off, _ in lay.sources()]
    for seg in lay.segments():
        ticks.append(seg["start"] + (seg["length"] - 1) / 2)
        span = offsets[seg["start"] : seg["start"] + seg["length"]]  # the segment's position ids, past the root's
        ids = f"p+{min(span)}" + (f"…{max(span)}" if max(span) > min(span) else "")
        labels.append(f"{seg['label']}<br>{'p' if ids == 'p+0' else ids}")
        if seg["start"]:
            edge = seg["start"] - 0.5
            for axis in ("x", "y"):
                fig.add_shape(
                    type="line",
                    line={"color": "#334155", "width": 1},
                    **(
                        {"x0": edge, "x1": edge, "y0": -0.5, "y1": lay.size - 0.5}
                        if axis == "x"
                        else {"y0": edge, "y1": edge, "x0": -0.5, "x1": lay.size - 0.5}
                    ),
                )
    return ticks, labels


def sweep_figure(sweep: dict[str, Any], title: str | None = None, slide: bool = False) -> go.Figure:
    """Measured speedup over plain decoding against W, one line per (N, G), A on hover; 1.0 dashed."""
    fig = go.Figure()
    series: dict[tuple[int, int], list[dict]] = {}
    for row in sweep["rows"]:
        series.setdefault((row["ngram"], row["guesses"]), []).append(row)
    chosen = sweep.get("chosen", {})
    for (n, g), rows in sorted(series.items()):
        rows.sort(key=lambda r: r["window"])
        is_chosen = n == chosen.get("ngram") and g == chosen.get("guesses")
        fig.add_trace(
            go.Scatter(
                x=[r["window"] for r in rows],
                y=[r["speedup"] for r in rows],
                mode="lines+markers",
                name=f"N={n}, G={g}" + (" (default)" if is_chosen else ""),
                line={"width": 4 if is_chosen else 1.5},
                customdata=[[r["A"], r["forward_tokens"]] for r in rows],
                hovertemplate="W=%{x}: %{y:.2f}×, A=%{customdata[0]:.2f}, %{customdata[1]} tokens/forward"
                "<extra></extra>",
            )
        )
    fig.add_hline(y=1.0, line={"dash": "dash", "color": REJECT}, annotation_text="plain decoding")
    fig.update_xaxes(title="W (window columns)", dtick=1)
    fig.update_yaxes(title="speedup over ar (median ratio)")
    return apply(fig, title, slide, height=420)


def gallery(trace: Trace) -> dict[str, go.Figure]:
    """A Lookahead trace's own figures, for export: the window, verification branch and mask of the step that
    accepted most, and the final pool."""
    work = trace.detailed(LookaheadDetail)
    if not work:
        return {}
    best, detail = max(work, key=lambda sd: sd[0].accepted)
    out = {
        "window": window_figure(detail, title=f"Step {best.index}: the Jacobi window"),
        "verify": verify_figure(detail, title=f"Step {best.index}: the verification branch"),
        "mask": mask_figure(detail.layout, title="One forward, two branches: the attention mask"),
    }
    if pool := final_pool(trace):
        out["pool"] = pool_figure(pool, title="The n-gram pool at the end")
    return out
