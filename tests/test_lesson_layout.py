"""Every lesson figure, as the projector shows it in a 1600 × 900 or 1280 × 720 window (presentation mode:
theme.legible, the stop's height, its column's width), keeps its text at 16 px or more, inside the figure, and no
annotation over another.
The figures are drawn from the shipped recording, no model and no browser (scripts/lesson_shots.py looks)."""

from __future__ import annotations

import textwrap
from functools import cache
from typing import Any

import plotly.graph_objects as go
import pytest

from specviz.output.lesson import facts
from specviz.output.lesson.model import LESSON_FILE, Stop, load_lesson
from specviz.output.viz.theme import fit_title, legible
from tests.layout import problems
from ui.lesson import WIDE, tallest

# window width -> the figure's width (px): the stop's whole box for a wide figure, its right column else (measured
# on screenshots: scripts/lesson_shots.py --size)
WIDTH = {1600: {True: 1460, False: 1010}, 1280: {True: 1140, False: 800}}
CLICKS = [(s.id, b) for s in load_lesson(LESSON_FILE).stops for b in range(s.frames)]


@cache
def pack():
    from specviz.output.lesson.pack import read

    return read()


def stop_at(stop_id: str, b: int) -> Stop:
    return next(s for s in load_lesson(LESSON_FILE).stops if s.id == stop_id).at(b)


def drawn(at: Stop) -> go.Figure:
    """The click's figure as the code draws it now: a stored bench's and the lineage drawn again (the recording
    keeps the figure it was made with) and badged as the lesson shows them, the rest from the recording's runs."""
    from specviz.output.lesson import figures
    from specviz.output.lesson.names import relabel
    from specviz.output.lesson.pages import figure_of

    source, here = figure_of(at.page, at.figure).source, pack().provenance
    if source in ("stored", "lineage"):  # with the badge the lesson gives a figure measured elsewhere
        again = figures.stored(at.figure, here) if source == "stored" else figures.lineage(here)
        return facts._badged(pack(), relabel(again.figure), again.measured)
    if source == "lab":
        return lab_again(facts.figure(pack(), at)[0], pack().stops[at.id]["data"])
    return facts.figure(pack(), at)[0]


def lab_again(fig: go.Figure, data: dict[str, Any]) -> go.Figure:
    """The losslessness lab's figure drawn again from the numbers the recording keeps (its bars and the target's
    marks, its rules' statistics)."""
    from specviz.core.acceptance import RULE_LABELS
    from specviz.output.viz.acceptance import lab_figure

    traces: list[Any] = list(fig.data)
    bars, target = [t for t in traces if t.type == "bar"], next(t for t in traces if t.type == "scatter")
    rules = [
        {"rule": k, "label": RULE_LABELS[k], "empirical": list(b.y[:-1]), "other": b.y[-1], **v}
        for (k, v), b in zip(data["rules"].items(), bars, strict=True)
    ]
    tokens = list(target.x[:-1])
    return lab_figure(
        {"rules": rules, "texts": tokens, "tokens": tokens, "p": list(target.y[:-1]), "p_other": target.y[-1]}
        | {"n": data["n"]}
    )


def projected(fig: go.Figure, figure: str, window: int = 1600) -> go.Figure:
    """What presentation mode draws: the projector's type, the stop's height (ui.lesson / ui.lesson_pack)."""
    tall = tallest(figure)
    return legible(fig, height=tall).update_layout(height=tall, width=WIDTH[window][figure in WIDE])


@pytest.mark.parametrize("window", sorted(WIDTH))
@pytest.mark.parametrize(("stop_id", "build"), CLICKS, ids=[f"{i}-{b + 1}" for i, b in CLICKS])
def test_every_lesson_figure_reads_from_the_back_row(stop_id, build, window):
    at = stop_at(stop_id, build)
    fig = projected(drawn(at), at.figure, window)
    found = problems(fig, WIDTH[window][at.figure in WIDE], tallest(at.figure))
    assert not found, f"{at.figure}: " + "; ".join(dict.fromkeys(found))  # one line per kind of text


def test_the_check_finds_small_cut_and_overlapping_text():
    """A figure with each fault is caught: an 11 px label, a note past the edge, two notes on one spot, a title
    too long for the width."""
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="markers+text", text=["a", "b"], textfont={"size": 11}))
    fig.add_annotation(x=1.2, y=0.5, xref="paper", yref="paper", text="a note far past the right edge", showarrow=False)
    for _ in range(2):
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", text="same spot", showarrow=False)
    fig.update_layout(title="a title " * 40, font={"size": 18}, width=800, height=500)
    found = " | ".join(problems(fig, 800, 500))
    for fault in ("text: 11 px", "cut at the edge", "overlap", "title"):
        assert fault in found, fault
    assert "text: 11 px" not in " | ".join(problems(legible(fig), 800, 500))  # the projector's type grows it
    apart = go.Figure(layout={"width": 800, "height": 500})  # a note shifted clear of another (as a badge is)
    for shift in (0, 30):
        apart.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", text="one spot", showarrow=False, yshift=shift)
    assert not [f for f in problems(apart, 800, 500) if "overlap" in f]
    apart.layout.annotations[1].yshift = 8
    assert [f for f in problems(apart, 800, 500) if "overlap" in f]


def test_the_check_finds_a_line_through_a_label_but_lets_an_arrow_leave_its_own():
    """A line shape and an arrow drawn across other labels are caught; an arrow from its own label is not, nor a
    line that passes beside a label."""
    fig = go.Figure(layout={"width": 800, "height": 500, "margin": {"l": 40, "r": 40, "t": 40, "b": 40}})
    fig.update_xaxes(range=[0, 10], visible=False).update_yaxes(range=[0, 10], visible=False)
    for x, y, text in ((2, 8, "crossed by a line"), (7, 8, "crossed by an arrow"), (5, 2, "beside a line")):
        fig.add_annotation(x=x, y=y, text=text, showarrow=False, font={"size": 16})
    fig.add_shape(type="line", x0=2, y0=6, x1=2, y1=10)  # straight down through the first label
    fig.add_shape(type="line", x0=0, y0=3.2, x1=10, y1=3.2)  # level, well above the third
    fig.add_annotation(x=9, y=9.5, ax=5, ay=6.5, xref="x", yref="y", axref="x", ayref="y", text="")  # across the second
    own = {"xref": "x", "yref": "y", "axref": "x", "ayref": "y", "text": "own label", "font": {"size": 16}}
    fig.add_annotation(x=3, y=5, ax=6, ay=5, **own)
    found = problems(fig, 800, 500)
    assert "a line crosses 'crossed by a line'" in found and "a line crosses 'crossed by an arrow'" in found
    assert not [f for f in found if "beside a line" in f or "own label" in f], found


def test_the_projector_grows_every_font_and_keeps_a_slides():
    fig = go.Figure(go.Bar(x=[1], y=[1], text=["x"], textfont={"size": 11}), layout={"font": {"size": 13}})
    fig.add_annotation(text="note", font={"size": 12}, x=0, y=0)
    big: Any = legible(fig)
    assert (big.layout.font.size, big.data[0].textfont.size, big.layout.annotations[0].font.size) == (18, 16, 17)
    slide: Any = legible(fig.update_layout(font={"size": 22}))
    assert slide.layout.font.size == 22


def test_a_subtitle_wrapped_again_for_a_narrower_column_reflows_instead_of_orphaning_a_word():
    said = "measured on Intel(R) Xeon(R) Processor (2 cores), smollm2-135m · cpu · float32 · onednn, on 2026-12-01, "
    page = fit_title(f"Where each method wins<br><sup>19 prompts, one run each<br>{said}under load (2.8)</sup>")
    assert page.count("<br>") == 3  # the page's width broke the long line once
    for width in (80, 88):
        lines = fit_title(page, chars=(40, width)).removesuffix("</sup>").split("<br><sup>")[1].split("<br>")
        # the author's break kept, the page's undone: the long line in as few lines as the column allows
        assert lines == ["19 prompts, one run each", *textwrap.wrap(said + "under load (2.8)", width)], lines
