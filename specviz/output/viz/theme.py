"""One look for every figure, with a 'slide' variant: white, large fonts, 16:9."""

from __future__ import annotations

import textwrap
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

# one colour per method, used by every chart so lanes and bars match across pages; colour-blind-safe (Okabe-Ito, with
# Tol's olive, indigo, wine and green), so no two methods differ by hue alone in the red-green range. Each method
# declares its own (its card, specviz.methods); these are the baselines drawn beside them: transformers' own decoding
BASELINE_COLORS = {"hf": "#b0b7c3", "hf-pld": "#0072b2"}
# the roles a draft-then-verify step gives a token, each in a hue no method's card uses (at least MIN_HUE_APART
# degrees from every method's and baseline's hue; tests/output/test_palette.py holds it), so a lane's colour never
# reads as a verdict: proposed by a drafter (magenta), accepted (leaf green), rejected (red), the target's own
# (royal blue)
DRAFT, ACCEPT, REJECT, VERIFY = "#c026d3", "#43a711", "#dc2626", "#1d4ed8"
ROLES = {"proposed": DRAFT, "accepted": ACCEPT, "rejected": REJECT, "target": VERIFY}
MIN_HUE_APART = 20
NEUTRAL = "#94a3b8"  # unreached, masked, plain: grey, as the plain-decoding baseline
JUDGE = "#0f172a"  # a step's accept phase (judging the drafts), dark beside every method's colour and DRAFT
ACCENT = "#7c3aed"  # the app's own colour (sliders, toggles), apart from every method's
FONT = "Inter, Helvetica Neue, Arial, sans-serif"
SLIDE_SIZE = (1600, 900)
# plotly_white's layout and its defaults for the trace types these figures draw: the whole template carries
# defaults for 24 types, and setting or copying it cost ~10-14 ms a figure, half of a recorded lesson stop's
# drawing time on a 2-core CPU (py-spy, 2026-12-04); this one costs ~4-5 ms and looks the same
DRAWN = ("bar", "scatter", "heatmap", "table", "histogram")
_WHITE: Any = pio.templates["plotly_white"]
TEMPLATE = go.layout.Template(
    layout=_WHITE.layout, data={k: v for k, v in _WHITE.data.to_plotly_json().items() if k in DRAWN}
)


def method_colors() -> dict[str, str]:
    """name -> colour: every method's (from its card, in order), then the baselines'."""
    from specviz import methods  # methods import torch; a figure that never asks for a colour need not

    return {**{c.name: c.colour for c in methods.cards()}, **BASELINE_COLORS}


def method_color(name: str) -> str:
    return method_colors().get(name, "#334155")


def add_key(fig: go.Figure, entries: list[tuple[str, str]]) -> None:
    """A colour key in the legend for what a heatmap's or a diagram's fills mean: one square per (meaning, fill),
    outlined so a white fill shows."""
    for name, fill in entries:
        marker = {"symbol": "square", "size": 16, "color": fill, "line": {"color": "#111827", "width": 1}}
        fig.add_scatter(x=[None], y=[None], mode="markers", name=name, marker=marker, hoverinfo="skip")


def bands(*fills: str) -> list[list[Any]]:
    """A heatmap colour scale of equal bands, one fill per integer cell code 0, 1, …: code k lands in band k with
    zmin = 0 and zmax the last code, or zmin = -0.5 and zmax the last code + 0.5."""
    n = len(fills)
    return [[edge / n, fill] for k, fill in enumerate(fills) for edge in (k, k + 1)]


def tint(colour: str, alpha: float) -> str:
    """A role's colour as a light fill (a region, a cell, a second bar): the same hue, `alpha` opaque."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:g})"


def token_text(text: str, limit: int | None = 12) -> str:
    """A token's text as every figure shows it: space as '␣', newline as '⏎', tab as '⇥', other control
    characters escaped, empty as '∅', and cut to `limit` characters with an ellipsis (hover keeps the full text)."""
    shown = "".join(
        "␣" if c == " " else "⏎" if c == "\n" else "⇥" if c == "\t" else c if c.isprintable() else repr(c)[1:-1]
        for c in text
    )
    if not shown:
        return "∅"
    return shown if limit is None or len(shown) <= limit else shown[: max(1, limit - 1)] + "…"


# every legend sits below the figure (in the bottom margin, which plotly grows to fit it): never over a title,
# a subplot's title, a right-hand axis or the data
LEGEND_BELOW = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "xanchor": "left", "x": 0}
# characters of a title line that fit: a page figure is at least ~560 px wide (half of a 1500 px page),
# a slide 1600 px with larger type
TITLE_CHARS, SUBTITLE_CHARS = {False: 62, True: 84}, {False: 96, True: 120}


def fit_title(title: str, slide: bool = False, chars: tuple[int, int] | None = None) -> str:
    """Wrap a title (and its <sup> subtitle lines) at word breaks so every line fits the figure's width: `chars`
    a line of each holds, else the page's or the slide's."""
    head, sep, rest = title.partition("<br><sup>")
    most, most_sub = chars or (TITLE_CHARS[slide], SUBTITLE_CHARS[slide])
    main = "<br>".join(textwrap.wrap(head.replace("<br>", " "), most)) or head
    if not sep:
        return main
    lines: list[str] = []
    for line in rest.removesuffix("</sup>").split("<br>"):
        # a break a wrap at the page's width made (the next word would not have fitted) is undone, so a figure
        # wrapped again for a narrower column reflows its lines rather than leaving a word alone on one
        if lines and line and len(lines[-1]) + 1 + len(line.split()[0]) > min(SUBTITLE_CHARS.values()):
            lines[-1] += " " + line
        else:
            lines.append(line)
    lines = [w for line in lines for w in textwrap.wrap(line, most_sub) or [""]]
    return main + "<br><sup>" + "<br>".join(lines) + "</sup>"


def _title_room(text: str, size: int) -> int:
    """Top margin (px) for a title's lines: plotly draws the title at 1.4× the font, a <sup> line smaller."""
    head, _, sub = text.partition("<br><sup>")
    lines = 1.4 * size * 1.35 * (head.count("<br>") + 1) + size * 1.6 * (sub.count("<br>") + 1 if sub else 0)
    return int(30 + lines)


INK = "#1e293b"  # the app's text colour (.streamlit/config.toml textColor): a projected figure's type, not grey
PROJECTOR_FONT, LEAST_FONT = 18, 16  # px: a projected figure's type, and the least any of its text may be
NARROWEST = 780  # px: a lesson figure's column in a 1280 px window


def legible(
    fig: go.Figure, size: int = PROJECTOR_FONT, least: int = LEAST_FONT, height: int | None = None
) -> go.Figure:
    """A copy with type for the back of a room: the base font `size` (or the figure's own, if larger), every
    font a figure set smaller for itself (a tree's labels, a diagram's notes) grown in the same proportion, to
    at least `least` px and at most `size`; one already larger kept. `height`: what it will be shown at (px),
    if not its own, so the title keeps its place above the plot."""
    d = fig.to_dict()
    lay = d.setdefault("layout", {})
    base = lay.get("font", {}).get("size") or 12
    size = max(size, base)  # a slide's larger type kept
    _grow_fonts(d, size / base, least, size)
    lay.setdefault("font", {})["size"] = size
    if "minsize" in (uniform := lay.get("uniformtext", {})):  # a bar's text shrunk to fit it: hidden under `least`
        uniform["minsize"] = max(uniform["minsize"], least)
    # said for every text the layout draws, as Streamlit's chart theme sets its own smaller, grey type for axes,
    # legend, notes and title where a figure leaves them to the base font
    fonts = [lay.setdefault("legend", {}).setdefault("font", {})]
    for key in [k for k in lay if k[1:5] == "axis"] + ["xaxis", "yaxis"]:
        axis = lay.setdefault(key, {})
        fonts += [axis.setdefault("tickfont", {}), axis.setdefault("title", {}).setdefault("font", {})]
    fonts += [note.setdefault("font", {}) for note in lay.get("annotations", [])]
    for font in fonts:
        font.setdefault("size", size)
        font.setdefault("color", INK)
    if text := lay.get("title", {}).get("text"):
        _title_on_top(lay, text, size, height or lay.get("height") or 450)
    for trace in d.get("data", []):  # a diagram's labels (text on hidden axes), grown, may use the margins
        axis = lay.get("xaxis" + str(trace.get("xaxis", "x"))[1:], {})
        if trace.get("type") == "scatter" and "text" in trace.get("mode", "") and axis.get("visible") is False:
            trace["cliponaxis"] = False
    return go.Figure(d, _validate=False)


BADGE = "provenance badge"  # the name of the annotation deck.badge pins on a figure measured elsewhere


def _title_on_top(lay: dict[str, Any], text: str, size: int, height: int) -> None:
    """The title's block centred a fixed distance under the top at the height it is shown at (plotly centres a
    block of lines as a whole, but anchors its top by the first line), with room under it for the subplots'
    titles at their own size: the top margin grown to hold both."""
    title = lay["title"]
    tall = title.setdefault("font", {}).setdefault("size", round(size * 1.3))
    # wrapped again for the projector's type in the narrowest column it is shown in (a 1280 px window's)
    text = title["text"] = fit_title(text, chars=(int(NARROWEST / 0.55 / tall), int(NARROWEST / 0.55 / 0.7 / tall)))
    block = _title_room(text, tall / 1.4) - 30  # its lines' height
    title.update(y=1 - (12 + block / 2) / height, yref="container", yanchor="middle")
    top = [
        a for a in lay.get("annotations", []) if a.get("yref") == "paper" and (a.get("y") or 0) >= 1 and a.get("text")
    ]
    lines_px = {id(a): (str(a["text"]).count("<br>") + 1) * 1.35 * a["font"]["size"] for a in top}
    under = max((lines_px[id(a)] for a in top if a.get("name") != BADGE), default=0)  # subplot titles, notes
    for a in top:
        if a.get("name") == BADGE and under:  # a provenance badge sits above the subplots' titles, not on them
            a["yshift"] = under + 4
    stacked = under + max((lines_px[id(a)] + 4 for a in top if a.get("name") == BADGE and under), default=0)
    margin = lay.setdefault("margin", {})
    margin["t"] = max(margin.get("t", 0), 12 + block + 10 + int(max([stacked, *lines_px.values()], default=0)))


def without_title(fig: go.Figure, height: int) -> go.Figure:
    """A legible() figure, shown `height` px tall, with its title taken off (a slide's title is the slide's own
    text) and the top margin the title took given back: its subplots' titles and a badge keep their room."""
    lay: Any = fig.layout
    if lay.title.text and lay.title.yref == "container" and lay.title.y is not None:
        block = 2 * ((1 - lay.title.y) * height - 12)  # _title_on_top centres the block 12 px + half of it down
        fig.update_layout(margin={"t": max(20, round((lay.margin.t or 0) - 12 - block))})
    return fig.update_layout(title=None)


def _grow_fonts(node: Any, grow: float, least: int, most: int) -> None:
    """Every explicit font size under `node` (a figure's dict) times `grow`, within [least, most] unless it was
    already over `most`, in place."""
    if isinstance(node, list):
        for item in node:
            _grow_fonts(item, grow, least, most)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key.endswith("font") and isinstance(value, dict) and "size" in value:
            old = value["size"]
            value["size"] = (
                [_grown(s, grow, least, most) for s in old] if isinstance(old, list) else _grown(old, grow, least, most)
            )
        _grow_fonts(value, grow, least, most)


def _grown(size: float, grow: float, least: int, most: int) -> float:
    return max(least, min(round(size * grow), max(size, most)))


def add_speedup(fig: go.Figure, x: list, y: list, name: str, color: str, mode: str = "lines") -> None:
    """A speedup curve on a second y axis, on the right (×, from zero), over the figure's own bars."""
    fig.add_trace(go.Scatter(x=x, y=y, name=name, yaxis="y2", mode=mode, line={"color": color, "width": 3}))
    fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": "speedup ×", "rangemode": "tozero"})


def apply(fig: go.Figure, title: str | None = None, slide: bool = False, height: int | None = None) -> go.Figure:
    """Style a figure in place and return it; `slide` gives a 16:9 white figure with large type.

    Applied again (as export.slide_version does), it keeps a figure's own legend placement and any larger
    margins it asked for; the title is wrapped to fit and pushes the top margin as far as its lines need."""
    layout: Any = fig["layout"]
    own_legend = layout.legend.orientation is not None or layout.legend.y is not None
    size = 22 if slide else 13
    text = fit_title(title, slide) if title else None
    old = layout.margin
    # subplot titles (annotations at the top of the plot area) need a line of their own under the title
    above = any((a.y or 0) >= 1 and a.yref == "paper" for a in layout.annotations)
    room = int(1.6 * size) if above else 8  # the title sits this far above the plot area
    top = (_title_room(text, size) if text else 30) + room
    margin = {"l": 60, "r": 30, "t": top, "b": 50}
    margin = {k: max(v, getattr(old, k) or 0) for k, v in margin.items()}
    tall = SLIDE_SIZE[1] if slide else height or layout.height or 450
    # the title block centred in the room above the plot (plotly anchors a multi-line title's top or bottom by
    # its first line, its middle by the whole block)
    title_y = 1 - (top - room) / 2 / tall
    fig.update_layout(
        template=TEMPLATE,
        font={"family": FONT, "size": size},
        title={"text": text, "x": 0.01, "xanchor": "left", "yref": "container", "y": title_y, "yanchor": "middle"}
        if text
        else None,
        margin=margin,
        hoverlabel={"font": {"family": FONT}},
    )
    if not own_legend:
        fig.update_layout(legend=LEGEND_BELOW)
    if slide:
        fig.update_layout(width=SLIDE_SIZE[0], height=SLIDE_SIZE[1], paper_bgcolor="white", plot_bgcolor="white")
    elif height:
        fig.update_layout(height=height)
    return fig
