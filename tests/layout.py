"""What plotly's layout tells of a figure's legibility without a browser: each text's font size, and each
annotation's and the title's box (estimated from font size and text length) against the figure's edges and the
other annotations. Used by tests/output/test_lesson_layout.py on every lesson figure at the projector's size."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

CHAR_W, LINE_H = 0.55, 1.25  # a character's width and a line's height, in font sizes (Inter/Arial, mixed text)
OVERLAP = 0.1  # the share of the smaller of two boxes another may cover (the estimates' slack)
INSET = 3  # px in from a text box's sides that a line may graze (the estimate's slack)
SMALL = 0.7  # plotly draws <sup> and <sub> at 70 % of the text's size
TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Box:
    """A text's estimated box in figure pixels (y down from the top), and what it says."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        """The share of the smaller box that the other covers."""
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        small = min((self.x1 - self.x0) * (self.y1 - self.y0), (other.x1 - other.x0) * (other.y1 - other.y0))
        return max(w, 0) * max(h, 0) / max(small, 1e-9)

    def crossed(self, a: tuple[float, float], b: tuple[float, float], inset: float = INSET) -> bool:
        """Whether the segment a-b passes through the box's inner part (inset px in from each side: the estimate's
        slack), by clipping the segment to it (Liang-Barsky)."""
        x0, y0, x1, y1 = self.x0 + inset, self.y0 + inset, self.x1 - inset, self.y1 - inset
        if x0 >= x1 or y0 >= y1:
            return False
        (ax, ay), (dx, dy) = a, (b[0] - a[0], b[1] - a[1])
        lo, hi = 0.0, 1.0
        for p, q in ((-dx, ax - x0), (dx, x1 - ax), (-dy, ay - y0), (dy, y1 - ay)):
            if p == 0:
                if q < 0:
                    return False
                continue
            t = q / p
            lo, hi = (max(lo, t), hi) if p < 0 else (lo, min(hi, t))
            if lo > hi:
                return False
        return True


def lines(text: str) -> list[str]:
    """The text's lines as drawn, tags stripped."""
    return [TAG.sub("", line) for line in re.split(r"<br\s*/?>", str(text))]


def smallest(text: str, size: float) -> float:
    """The smallest size a text is drawn at: a <sup> or <sub> part is smaller."""
    return size * SMALL if re.search(r"<su[bp]>", str(text)) else size


def traces(fig: go.Figure) -> list[Any]:
    return list(fig.data)


def text_sizes(fig: go.Figure) -> list[tuple[str, float]]:
    """(what, size in px) of every text the figure draws: its title, axes, legend, annotations, traces' text."""
    lay: Any = fig.layout
    base = lay.font.size or 12
    out = []
    if lay.title.text:
        out.append(("title", smallest(lay.title.text, lay.title.font.size or base * 1.4)))
    for key in [k for k in fig.to_dict()["layout"] if re.fullmatch(r"[xy]axis\d*", k)]:
        axis = lay[key]
        if axis.showticklabels is not False and axis.visible is not False:
            out.append((f"{key} ticks", axis.tickfont.size or base))
        if axis.title.text:
            out.append((f"{key} title", smallest(axis.title.text, axis.title.font.size or base)))
    if lay.showlegend is not False and any(t.showlegend is not False and t.name for t in traces(fig)):
        out.append(("legend", lay.legend.font.size or base))
    for a in lay.annotations:
        if a.text and a.visible is not False:
            out.append((f"annotation {lines(a.text)[0][:30]!r}", smallest(a.text, a.font.size or base)))
    # plotly shrinks a text that does not fit inside its bar; uniformtext shows the bars' texts at one size, down to
    # its minsize (hidden under it), so a bar's text may be drawn that small
    shrunk = lay.uniformtext.minsize if lay.uniformtext.mode else None
    for t in traces(fig):
        out += [(what, min(s, shrunk) if shrunk and t.type == "bar" else s) for what, s in trace_sizes(t, base)]
    return out


def trace_sizes(t: Any, base: float) -> list[tuple[str, float]]:
    """A trace's own text (labels on bars and markers, a heatmap's cell text) and its colour bar."""
    out = []
    has_text = getattr(t, "text", None) is not None or getattr(t, "texttemplate", None)
    drawn = t.type != "scatter" or "text" in (t.mode or "")
    if has_text and drawn and getattr(t, "textfont", None) is not None:
        size = t.textfont.size
        for s in size if isinstance(size, tuple | list) else [size]:
            out.append((f"{t.type} {t.name or ''} text", s or base))
    marker = getattr(t, "marker", None)
    if t.type == "heatmap" and t.showscale is not False:
        out.append(("heatmap colour bar", t.colorbar.tickfont.size or base))
    elif marker is not None and "showscale" in marker and marker.showscale:
        out.append((f"{t.type} colour bar", marker.colorbar.tickfont.size or base))
    return out


def paper_box(fig: go.Figure, a: Any, width: int, height: int) -> Box | None:
    """An annotation's box in pixels, where its position can be read without drawing (paper coordinates or an
    axis with a fixed range); None otherwise."""
    lay: Any = fig.layout
    m = lay.margin
    left, top = m.l or 80, m.t or 100
    plot_w, plot_h = width - left - (m.r or 80), height - top - (m.b or 80)
    px, py = position(fig, a.x, a.xref or "x", "x"), position(fig, a.y, a.yref or "y", "y")
    if px is None or py is None:
        return None
    cx, cy = left + px * plot_w + (a.xshift or 0), top + (1 - py) * plot_h - (a.yshift or 0)  # shifts: px, up
    if a.showarrow is not False and a.axref in (None, "pixel"):  # the text (ax, ay) px from the point, centred
        cx, cy = cx + (a.ax if a.ax is not None else -10), cy + (a.ay if a.ay is not None else -30)
    size = a.font.size or lay.font.size or 12
    rows = lines(a.text)
    w, h = CHAR_W * size * max(len(r) for r in rows), LINE_H * size * len(rows)
    arrow = a.showarrow is not False
    xa = anchor(a.xanchor, px, arrow or (a.xref or "x") != "paper", ("left", "center", "right"))
    ya = anchor(a.yanchor, py, arrow or (a.yref or "y") != "paper", ("bottom", "middle", "top"))
    x0 = cx - w * {"left": 0, "center": 0.5, "right": 1}[xa]
    y0 = cy - h * {"top": 0, "middle": 0.5, "bottom": 1}[ya]
    return Box(rows[0][:40], x0, y0, x0 + w, y0 + h)


def point_boxes(fig: go.Figure, width: int, height: int) -> list[tuple[Box, bool]]:
    """Each scatter point's text box in pixels (placed by its textposition beside its marker) on axes with a fixed
    range, and whether plotly clips it at the plot area (cliponaxis, on by default)."""
    lay: Any = fig.layout
    m, base = lay.margin, lay.font.size or 12
    left, top = m.l or 80, m.t or 100
    plot_w, plot_h = width - left - (m.r or 80), height - top - (m.b or 80)
    out = []
    for t in traces(fig):
        if t.type != "scatter" or "text" not in (t.mode or "") or t.text is None:
            continue
        texts = [t.text] * len(t.x) if isinstance(t.text, str) else list(t.text)
        where = t.textposition if isinstance(t.textposition, str) or t.textposition is None else None
        size = t.textfont.size if isinstance(t.textfont.size, int | float) else base
        gap = (t.marker.size if isinstance(t.marker.size, int | float) else 6) / 2 + 2
        for i, (x, y, text) in enumerate(zip(t.x, t.y, texts, strict=False)):
            px, py = position(fig, x, t.xaxis or "x", "x"), position(fig, y, t.yaxis or "y", "y")
            if px is None or py is None or not text:
                continue
            spot = where or (t.textposition[i] if t.textposition is not None else "middle center")
            rows = lines(text)
            w, h = CHAR_W * size * max(len(r) for r in rows), LINE_H * size * len(rows)
            cx, cy = left + px * plot_w, top + (1 - py) * plot_h
            vert, _, horiz = spot.partition(" ")
            y0 = {"top": cy - gap - h, "bottom": cy + gap, "middle": cy - h / 2}[vert]
            x0 = {"left": cx - gap - w, "right": cx + gap, "center": cx - w / 2}[horiz or "center"]
            out.append((Box(rows[0][:40], x0, y0, x0 + w, y0 + h), t.cliponaxis is not False))
    return out


def anchor(given: str | None, at: float, central: bool, sides: tuple[str, str, str]) -> str:
    """Plotly's 'auto' anchor: the centre with an arrow or at a data position, else the side nearest it."""
    if given and given != "auto":
        return given
    if central:
        return sides[1]
    return sides[0] if at <= 1 / 3 else sides[2] if at >= 2 / 3 else sides[1]


def position(fig: go.Figure, v: Any, ref: str, dim: str) -> float | None:
    """A coordinate as a fraction of the plot area: a paper one as is, a data one through its axis's fixed range
    and domain (None when the range is plotly's to choose, or the value is a category)."""
    lay: Any = fig.layout
    if ref.endswith(" domain"):
        ref = ref.split()[0]
        axis = lay[f"{dim}axis{ref[1:]}"]
        lo, hi = axis.domain or (0, 1)
        return lo + (v or 0) * (hi - lo)
    if ref == "paper":
        return 0.0 if v is None else float(v)
    axis = lay[f"{dim}axis{ref[1:]}"]
    if not axis.range or not isinstance(v, int | float) or axis.type in ("log", "date", "category"):
        return None
    r0, r1 = axis.range
    lo, hi = axis.domain or (0, 1)
    return lo + (v - r0) / (r1 - r0) * (hi - lo)


Point = tuple[float, float]


def segments(fig: go.Figure, width: int, height: int) -> list[tuple[Point, Point, str]]:
    """The lines drawn on data axes with fixed ranges, in pixels, each with the text it belongs to: line shapes
    (none), and arrows whose tail is a data point (axref 'x'), from tail to head (an arrow leaves its own text's
    box, so that one it may cross)."""
    lay: Any = fig.layout
    m = lay.margin
    left, top = m.l or 80, m.t or 100
    plot_w, plot_h = width - left - (m.r or 80), height - top - (m.b or 80)

    def at(x: Any, y: Any, xref: str, yref: str) -> tuple[float, float] | None:
        px, py = position(fig, x, xref, "x"), position(fig, y, yref, "y")
        return None if px is None or py is None else (left + px * plot_w, top + (1 - py) * plot_h)

    ends = [
        (at(s.x0, s.y0, s.xref or "x", s.yref or "y"), at(s.x1, s.y1, s.xref or "x", s.yref or "y"), "")
        for s in lay.shapes
        if s.type == "line"
    ]
    ends += [
        (at(a.ax, a.ay, a.axref, a.ayref or "y"), at(a.x, a.y, a.xref or "x", a.yref or "y"), lines(a.text)[0][:40])
        for a in lay.annotations
        if a.showarrow is not False and a.axref not in (None, "pixel")
    ]
    return [(a, b, own) for a, b, own in ends if a is not None and b is not None]


def title_box(fig: go.Figure, width: int, height: int) -> Box | None:
    """The title's box: its lines' width from its left, its height about where plotly puts it (a container y
    with its anchor, as apply() sets it; else the middle of the top margin)."""
    lay: Any = fig.layout
    if not lay.title.text:
        return None
    size = lay.title.font.size or (lay.font.size or 12) * 1.4
    head, _, sub = str(lay.title.text).partition("<sup>")
    head = re.sub(r"<br\s*/?>$", "", head)  # the line break before a subtitle
    w = max([CHAR_W * size * len(r) for r in lines(head)] + [CHAR_W * size * SMALL * len(r) for r in lines(sub)])
    h = LINE_H * size * (len(lines(head)) + SMALL * len(lines(sub)) if sub else len(lines(head)))
    x0 = (lay.title.x if lay.title.x is not None else 0.05) * width
    centre = (1 - lay.title.y) * height if lay.title.yref == "container" and lay.title.y else (lay.margin.t or 100) / 2
    y0 = centre - h * {"top": 0, "bottom": 1}.get(lay.title.yanchor, 0.5)
    return Box(lines(head)[0][:40], x0, y0, x0 + w, y0 + h)


def problems(fig: go.Figure, width: int, height: int, least: float = 16) -> list[str]:
    """What would be unreadable at this size: text under `least` px, a box past the figure's edge, annotations
    over one another (more than OVERLAP of the smaller one covered)."""
    found = [f"{what}: {size:g} px" for what, size in text_sizes(fig) if size < least - 1e-6]
    if (t := title_box(fig, width, height)) is not None and t.x1 > width:
        found.append(f"title {t.text!r} runs {t.x1 - width:.0f} px past the right edge")
    lay: Any = fig.layout
    boxes = [b for a in lay.annotations if a.text and (b := paper_box(fig, a, width, height)) is not None]
    boxes += [t] if t is not None else []  # a subplot's title under the figure's
    for b in boxes:
        if b.x0 < -2 or b.y0 < -2 or b.x1 > width + 2 or b.y1 > height + 2:
            found.append(f"annotation {b.text!r} cut at the edge ({b.x0:.0f}, {b.y0:.0f})–({b.x1:.0f}, {b.y1:.0f})")
    m, clipped = lay.margin, []
    area = ((m.l or 80) - 2, (m.t or 100) - 2, width - (m.r or 80) + 2, height - (m.b or 80) + 2)
    for b, clips in point_boxes(fig, width, height):
        edge = area if clips else (-2, -2, width + 2, height + 2)
        if b.x0 < edge[0] or b.y0 < edge[1] or b.x1 > edge[2] or b.y1 > edge[3]:
            clipped.append(f"label {b.text!r} cut at the {'plot area' if clips else 'figure'}'s edge")
        boxes.append(b)
    found += clipped
    for i, a in enumerate(boxes):
        found += [f"annotations {a.text!r} and {b.text!r} overlap" for b in boxes[i + 1 :] if a.overlap(b) > OVERLAP]
    drawn = segments(fig, width, height)
    crossed = [b for b in boxes if any(b.crossed(p, q) for p, q, own in drawn if own != b.text)]
    found += [f"a line crosses {b.text!r}" for b in crossed]
    return found
