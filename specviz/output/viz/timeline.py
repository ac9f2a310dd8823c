"""The serial-versus-parallel timeline: every forward pass as a bar on a shared wall-clock axis."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz.core import measure
from specviz.core.trace import Trace
from specviz.output.viz.theme import DRAFT, JUDGE, NEUTRAL, SLIDE_SIZE, add_key, apply, method_color, tint, token_text


def _label(texts: list[str], limit: int = 14) -> str:
    return token_text("".join(texts), limit)


# drawn in this order, overlaid: a step's accept bar lies over the end of its forward-pass bar
PARTS = (("prefill", NEUTRAL, 0.6), ("propose", DRAFT, 0.9), ("verify", None, 0.95), ("accept", JUDGE, 0.9))
# what the legend calls each part; a lane's forward passes are keyed by its method, in its colour
KEYS = {"prefill": "prefill (the prompt)", "propose": "drafting (propose)", "accept": "judging drafts (accept)"}


def _bars_at(traces: list[Trace], lanes: list[str], upto_s: float | None) -> list[go.Bar]:
    """A fixed list of bar traces (lane × part), clipped at `upto_s`; the same shape for every frame."""
    out = []
    for lane, trace in zip(lanes, traces):
        bars = _lane_bars(trace, upto_s)
        for part, color, opacity in PARTS:
            rows = [b for b in bars if b["part"] == part]
            out.append(
                go.Bar(
                    y=[lane] * len(rows),
                    x=[b["dur"] * 1000 for b in rows],
                    base=[b["start"] * 1000 for b in rows],
                    orientation="h",
                    name=part if part != "verify" else "forward pass",
                    marker={
                        "color": color or method_color(trace.method),
                        "opacity": opacity,
                        "line": {"width": 0.5, "color": "white"},
                    },
                    showlegend=False,  # the key (_key) names every lane and part, whatever a frame has drawn
                    text=[b["label"] for b in rows],
                    textposition="inside",
                    insidetextanchor="middle",
                    textangle=0,
                    customdata=[[b["step"], b["label"], b["tokens"]] for b in rows],
                    hovertemplate="step %{customdata[0]}: %{customdata[2]} token(s)<br>"
                    "%{customdata[1]}<br>%{x:.1f} ms<extra>" + part + "</extra>",
                )
            )
    return out


def _lanes(traces: list[Trace]) -> list[str]:
    return [f"{t.method}  ({t.new_tokens} tok)" for t in traces]


def _key(fig: go.Figure, traces: list[Trace]) -> None:
    """The legend, readable alone: the prefill, each lane's forward passes by its method in its colour, and the
    drafting and judging slivers where a lane has them; the bars themselves stay out of it (a frame of the
    replay may not have drawn them yet, and plotly keys no empty trace)."""
    shade = {part: opacity for part, _c, opacity in PARTS}
    found = {b["part"] for t in traces for b in _lane_bars(t, None)}
    entries = [(KEYS["prefill"], tint(NEUTRAL, shade["prefill"]))]
    entries += [(m, tint(method_color(m), shade["verify"])) for m in dict.fromkeys(t.method for t in traces)]
    entries += [(KEYS[p], tint(c, shade[p])) for p, c in (("propose", DRAFT), ("accept", JUDGE)) if p in found]
    add_key(fig, entries)


def race_title(traces: list[Trace]) -> str:
    """A title that holds whichever lane ends first: what the lanes share, and that each is one method."""
    if len(traces) < 2:
        return "Each bar one forward pass, as long as it took"
    same = all(t.output_ids == traces[0].output_ids for t in traces)
    return f"The same {'answer' if same else 'prompt'}, each lane one method"


def timeline_figure(
    traces: list[Trace], upto_s: float | None = None, title: str | None = None, slide: bool = False
) -> go.Figure:
    """One lane per trace: prefill, then per step a propose, a verify and an accept bar as long as they took.

    `upto_s` cuts every lane at the same wall-clock instant, to show the lanes racing together.
    """
    lanes = _lanes(traces)
    fig = go.Figure(_bars_at(traces, lanes, upto_s))
    _key(fig, traces)
    # a bar's tokens show inside it only at full size (where they fit); the others keep them on hover
    size = 18 if slide else 12
    fig.update_traces(textfont={"size": size}, selector={"type": "bar"})
    fig.update_layout(barmode="overlay", bargap=0.35, uniformtext={"minsize": size, "mode": "hide"})
    fig.update_xaxes(title="wall-clock time (ms)", range=[0, _end(traces, None) * 1000 * 1.02])
    # the lanes are named from t = 0, before any bar exists (top to bottom in the order given)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=lanes, range=[len(lanes) - 0.5, -0.5])
    return apply(fig, title, slide=slide, height=_height(traces))


def _height(traces: list[Trace]) -> int:
    """A timeline's height off the slides: room for every lane."""
    return 150 + 60 * len(traces)


def timeline_animation(
    traces: list[Trace], frames: int = 40, title: str | None = None, slide: bool = False
) -> go.Figure:
    """The timeline with a Play button: every lane grows on the same clock, so the fastest ends first.

    It is drawn finished (never an empty chart on arrival); ▶ replays the race from t = 0."""
    lanes, end = _lanes(traces), _end(traces, None)
    fig = timeline_figure(traces, title=title, slide=slide)
    cuts = [end * (i + 1) / frames for i in range(frames)]
    names = [f"{1000 * c:.0f}" for c in cuts]  # each frame is named by its cut, in ms
    fig.frames = [go.Frame(data=_bars_at(traces, lanes, c), name=n) for c, n in zip(cuts, names)]
    fig.update_layout(updatemenus=[_play_buttons()], sliders=[_slider(names)])
    height = SLIDE_SIZE[1] if slide else _height(traces)  # what timeline_figure gave it
    fig.update_layout(height=height + 90, margin={"b": 120})  # room for the controls
    return fig


def _play_buttons() -> dict[str, Any]:
    """Play from the start, and pause."""
    play = {"frame": {"duration": 120, "redraw": True}, "fromcurrent": False, "transition": {"duration": 0}}
    return {
        "type": "buttons",
        "showactive": False,
        "x": 0,
        "y": -0.12,
        "xanchor": "left",
        "direction": "left",
        "buttons": [
            {"label": "▶ Play", "method": "animate", "args": [None, play]},
            {"label": "❚❚", "method": "animate", "args": [[None], {"mode": "immediate"}]},
        ],
    }


def _slider(names: list[str]) -> dict[str, Any]:
    """A time slider with one stop per frame (named by its cut in ms)."""
    jump = {"mode": "immediate", "frame": {"duration": 0, "redraw": True}}
    return {
        "x": 0.12,
        "len": 0.88,
        "y": -0.05,
        "active": len(names) - 1,  # the figure is drawn finished
        "currentvalue": {"prefix": "t = ", "suffix": " ms"},
        "steps": [{"label": n, "method": "animate", "args": [[n], jump]} for n in names],
    }


def _end(traces: list[Trace], upto_s: float | None) -> float:
    total = max((measure.generation_s(t) for t in traces), default=0.0)
    return min(total, upto_s) if upto_s is not None else total


def _lane_bars(trace: Trace, upto_s: float | None) -> list[dict]:
    """Bars for one trace as plain dicts, clipped at `upto_s`."""
    bars = [_bar("prefill", 0.0, trace.prefill_s, "prompt", "-", len(trace.prompt_ids))]
    t = trace.prefill_s
    for s in trace.steps:
        verify = s.verify_s if s.forward_tokens else 0.0
        rest = max(0.0, s.wall_s - s.propose_s - verify)  # accept, commit, bookkeeping: drawn with the verify bar
        start = t + s.propose_s
        drafted = s.proposed > 0  # plain decoding's phases time nothing but its forward pass: no bars of theirs
        if drafted and s.propose_s > 0:
            bars.append(_bar("propose", t, s.propose_s, "", s.index, s.accepted))
        bars.append(_bar("verify", start, verify + rest, _label(s.texts), s.index, s.accepted))
        if drafted and s.accept_s > 0:  # over the verify bar, where the acceptance ran: right after the forward pass
            bars.append(_bar("accept", start + verify, s.accept_s, "", s.index, s.accepted))
        t += s.wall_s
    if upto_s is None:
        return bars
    return [dict(b, dur=min(b["dur"], upto_s - b["start"])) for b in bars if b["start"] < upto_s]


def _bar(part: str, start: float, dur: float, label: str, step: int | str, tokens: int) -> dict:
    return {"part": part, "start": start, "dur": dur, "label": label, "step": step, "tokens": tokens}


def tokens_over_time_figure(traces: list[Trace], slide: bool = False) -> go.Figure:
    """Committed tokens against wall-clock time: the steeper line is the faster method."""
    fig = go.Figure()
    for trace in traces:
        xs, ys, t, n = [0.0, trace.prefill_s * 1000], [0, 0], trace.prefill_s, 0
        for s in trace.steps:
            t += s.wall_s
            n += s.accepted
            xs.append(t * 1000)
            ys.append(n)
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            line={"shape": "hv", "color": method_color(trace.method), "width": 3},
            name=trace.method,
        )
    fig.update_xaxes(title="wall-clock time (ms)")
    fig.update_yaxes(title="tokens committed")
    return apply(fig, "Tokens committed over time", slide=slide, height=360)
