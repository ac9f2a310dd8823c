"""Point labels that never overlap: each takes the nearest free spot around its point (with a leader line when it
had to move away), judged on the smallest plot it is drawn on so that it stays clear on every larger one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

# the smallest plot area (px) a labelled panel gets (half a 1280 px page's lesson column) and the largest type
# it is shown in (presentation mode's 18 px); a slide's 1600 × 900 panel is larger relative to its 22 px type
PLOT_PX, FONT_PX = (230.0, 200.0), 17.0
MARKER_PX = 9.0  # a marker's radius and a little air
ANGLES = (90, 45, 135, 0, 180, -45, -135, -90, 67, 113, 22, 158, -22, -158, -67, -113)  # up first, then around
RINGS = (0.15, 1.2, 2.4)  # gaps between marker and label, in label heights; past the first a leader line is drawn

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in nominal pixels, y up


@dataclass(frozen=True)
class Spot:
    """A label's offset from its point (px, y up) to its anchor, the side of the label there, and whether a line
    leads to the point. Its near side is anchored, so larger type grows away from the point."""

    dx: float
    dy: float
    xanchor: str  # "left", "center" or "right"
    yanchor: str  # "bottom", "middle" or "top"
    leader: bool


def _overlap(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _size(text: str) -> tuple[float, float]:
    return 0.62 * FONT_PX * len(text) + 4, 1.3 * FONT_PX


def _cost(box: Box, placed: list[Box], markers: list[Box], diagonal: bool) -> float:
    """Overlapping a label or a marker, or leaving the plot, costs most; crossing the diagonal a little."""
    outside = sum(max(0.0, v) for v in (-box[0], -box[1], box[2] - PLOT_PX[0], box[3] - PLOT_PX[1]))
    hit = sum(_overlap(box, b) for b in placed) + sum(_overlap(box, m) for m in markers)
    crosses = diagonal and _crosses_diagonal(box)
    return 100 * (hit + 40 * outside) + (200.0 if crosses else 0.0)


def _crosses_diagonal(box: Box) -> bool:
    """Whether the line y = x, drawn corner to corner of the plot, passes through the box."""
    k = PLOT_PX[1] / PLOT_PX[0]
    return box[1] < k * box[2] and box[3] > k * box[0]


def place(
    points: list[tuple[float, float]], texts: list[str], xrange: tuple[float, float], yrange: tuple[float, float],
    diagonal: bool = False,
) -> list[Spot]:  # fmt: skip
    """A spot per point's label: the first of the nearest candidates around it that hits no label, no marker and
    stays inside the plot; the most crowded points choose first. `diagonal`: avoid the corner-to-corner line."""
    sx, sy = PLOT_PX[0] / (xrange[1] - xrange[0]), PLOT_PX[1] / (yrange[1] - yrange[0])
    px = [((x - xrange[0]) * sx, (y - yrange[0]) * sy) for x, y in points]
    r = MARKER_PX
    markers = [(x - r, y - r, x + r, y + r) for x, y in px]
    crowd = [sum(math.dist(p, q) < 4 * FONT_PX for q in px) for p in px]
    order = sorted(range(len(px)), key=lambda i: (-crowd[i], -px[i][1]))
    placed: list[Box] = []
    spots: dict[int, Spot] = {}
    for i in order:
        best: tuple[float, Box, Spot] | None = None
        for ring, gap in enumerate(RINGS):
            for k, deg in enumerate(ANGLES):
                box, spot = _candidate(px[i], texts[i], deg, r + gap * _size(texts[i])[1], ring > 0)
                cost = _cost(box, placed, markers, diagonal) + ring * 60 + k
                if best is None or cost < best[0]:
                    best = (cost, box, spot)
        assert best is not None
        placed.append(best[1])
        spots[i] = best[2]
    return [spots[i] for i in range(len(px))]


def _candidate(at: tuple[float, float], text: str, deg: float, dist: float, leader: bool) -> tuple[Box, Spot]:
    """The label `dist` px from its point along `deg`: its box (nominal px) and its spot."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    xa = "left" if c > 0.3 else "right" if c < -0.3 else "center"
    ya = "bottom" if s > 0.3 else "top" if s < -0.3 else "middle"
    spot = Spot(c * dist, s * dist, xa, ya, leader)
    return box(at, text, spot), spot


def box(at: tuple[float, float], text: str, spot: Spot) -> Box:
    """The box a label at `spot` covers, in nominal px (y up), beside its point `at` (nominal px)."""
    w, h = _size(text)
    x0 = at[0] + spot.dx - {"left": 0, "center": w / 2, "right": w}[spot.xanchor]
    y0 = at[1] + spot.dy - {"bottom": 0, "middle": h / 2, "top": h}[spot.yanchor]
    return x0, y0, x0 + w, y0 + h


def annotate(
    fig: go.Figure, points: list[tuple[float, float]], texts: list[str], xrange: tuple[float, float],
    yrange: tuple[float, float], row: int | None = None, col: int | None = None, diagonal: bool = False,
) -> go.Figure:  # fmt: skip
    """Label each point where `place` puts it: the text alone beside it, or with a grey leader line to it."""
    for (x, y), text, spot in zip(points, texts, place(points, texts, xrange, yrange, diagonal), strict=True):
        common = {"x": x, "y": y, "text": text, "xanchor": spot.xanchor, "yanchor": spot.yanchor}
        if spot.leader:  # the arrow's tail is the label's anchor, `ax` and `ay` px from the point (ay down)
            fig.add_annotation(
                **common, ax=spot.dx, ay=-spot.dy, showarrow=True, arrowhead=0, arrowwidth=1,
                arrowcolor="#94a3b8", standoff=MARKER_PX - 2, font={"color": "#334155"}, row=row, col=col,
            )  # fmt: skip
        else:
            fig.add_annotation(
                **common, xshift=spot.dx, yshift=spot.dy, showarrow=False, font={"color": "#334155"}, row=row, col=col
            )
    return fig
