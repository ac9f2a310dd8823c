"""Every lesson figure, as the projector shows it in a 1600 × 900 or 1280 × 720 window (presentation mode:
theme.legible, the height its stop gives it, its column's width) and on its slide (the deck's picture on a
1600 × 900 screen), keeps its text at 16 px or more, inside the figure, and no annotation over another; and every
stop's narration, figure, numbers and caption end above the 900 px fold (ui.lesson_frame's estimate).
The figures are drawn from the shipped recording, no model and no browser (scripts/lesson_shots.py looks)."""

from __future__ import annotations

import textwrap
from functools import cache
from typing import Any

import plotly.graph_objects as go
import pytest

from specviz.output.deck import SCREEN_PX, SLIDE_IN, Slide, picture_px, placed
from specviz.output.lesson import facts
from specviz.output.lesson.model import LESSON_FILE, Stop, load_lesson
from specviz.output.lesson.visitor import escaped
from specviz.output.viz.theme import fit_title, legible
from tests.layout import problems
from ui.lesson import WIDE, tallest
from ui.lesson_frame import FOLD, LEAST, SCREEN, Frame, caption, frame_of

# window width -> the figure's width (px): the stop's whole box for a wide figure, its right column else (measured
# on screenshots: scripts/lesson_shots.py --size)
WIDTH = {1600: {True: 1460, False: 1010}, 1280: {True: 1140, False: 800}}
CLICKS = [(s.id, b) for s in load_lesson(LESSON_FILE).stops for b in range(s.frames)]
EVERY = [(s.id, b) for s in load_lesson(LESSON_FILE).stops for b in range(s.clicks)]  # the four questions' too
PX_IN = SCREEN_PX / SLIDE_IN[0]  # a slide's px an inch on a 1600 × 900 screen


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


@cache
def framed(stop_id: str, click: int) -> Frame:
    """Where the stop's parts go at this click, as ui.lesson_pack's focus places them from the recording."""
    from ui.lesson_pack import SHOWN, _replayed

    whole = next(s for s in load_lesson(LESSON_FILE).stops if s.id == stop_id)
    at = whole.at(min(click, whole.frames - 1))
    fig, measured, verdicts, lines = _replayed(pack(), at)
    warnings = [escaped(v.sentence(), SHOWN) for v in verdicts if v.holds is not True]
    below = (lines, warnings, caption(pack(), load_lesson(LESSON_FILE), at, fig, measured)[0])
    return frame_of(pack(), load_lesson(LESSON_FILE), at, click >= whole.frames, tallest(at.figure), below)


def projected(fig: go.Figure, figure: str, window: int = 1600, tall: int | None = None) -> go.Figure:
    """What presentation mode draws: the projector's type, the stop's height (ui.lesson / ui.lesson_pack)."""
    tall = tall or tallest(figure)
    return legible(fig, height=tall).update_layout(height=tall, width=WIDTH[window][figure in WIDE])


# the 1600-wide window in the fast tier, the narrower laptop's in the full tier (scripts/test.sh)
WINDOWS = [pytest.param(w, marks=() if w == 1600 else pytest.mark.full) for w in sorted(WIDTH)]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize(("stop_id", "build"), CLICKS, ids=[f"{i}-{b + 1}" for i, b in CLICKS])
def test_every_lesson_figure_reads_from_the_back_row(stop_id, build, window):
    at, tall = stop_at(stop_id, build), framed(stop_id, build).height
    fig = projected(drawn(at), at.figure, window, tall)
    found = problems(fig, WIDTH[window][at.figure in WIDE], tall)
    assert not found, f"{at.figure}: " + "; ".join(dict.fromkeys(found))  # one line per kind of text


@pytest.mark.parametrize(("stop_id", "click"), EVERY, ids=[f"{i}-{b + 1}" for i, b in EVERY])
def test_every_stop_ends_above_the_fold(stop_id, click):
    """Its narration (or its questions answered), figure, numbers, failing checks and caption, stacked as the
    lesson shows them on a 1600 × 900 screen: none past the fold, and the figure no shorter than LEAST."""
    f = framed(stop_id, click)
    where = ", ".join(sorted(f.under)) or "nothing"
    assert f.fits(), (
        f"{stop_id}: the text ends at {f.text_bottom:.0f} px, the figure ({f.height} px, {where} under it) at "
        f"{f.figure_bottom:.0f} px of {SCREEN[1] - FOLD}; at least {LEAST} px for the figure"
    )


@cache
def slides_of(stop_id: str) -> list[Slide]:
    from specviz.output.lesson.slides import stop_slides

    lesson = load_lesson(LESSON_FILE)
    return stop_slides(pack(), lesson, lesson.stops[lesson.index(stop_id)], lesson.index(stop_id) + 1)


@pytest.mark.parametrize(("stop_id", "build"), CLICKS, ids=[f"{i}-{b + 1}" for i, b in CLICKS])
def test_every_slide_figure_reads_on_the_screen(stop_id, build):
    """On its slide (the narration's slide, a build's, the four questions'), the figure drawn at the size its
    picture takes on a 1600 × 900 screen (deck.placed) keeps its text at 16 px or more, inside, apart."""
    at, slides = stop_at(stop_id, build), slides_of(stop_id)
    mine = [slides[build]] + (slides[build + 1 :] if build == at.frames - 1 else [])  # its questions' slide
    for slide in mine:
        width, height = picture_px(slide)
        found = problems(placed(drawn(at), width / PX_IN, height / PX_IN), width, height)
        assert not found, f"{at.figure} at {width} × {height}: " + "; ".join(dict.fromkeys(found))


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


def test_a_stops_numbers_go_where_the_figure_keeps_the_most_height():
    """Beside a short narration the numbers sit under it and the figure keeps its height; under a long one they go
    under the figure, which gives up theirs; a wide figure gives up the narration's lines above it too."""
    from ui.lesson_frame import TOP, blocks, plan

    numbers = ["Medusa: A 1.60, r 1.22, 27.6 tok/s, speedup 1.29× (1.21–1.33), 3 runs"]
    below = blocks(numbers, [], "Prompt: x.", "The answer: 32 tokens, every method wrote it")
    short = plan("Each lane is one method.", below, False, False, 620)
    assert short.under == frozenset() and short.height == 620 and short.fits()
    long = plan("Each lane is one method writing the same answer. " * 14, below, False, False, 620)
    assert long.under and long.height < 620 and long.fits() and long.figure_bottom > long.text_bottom - 1
    wide = [plan(said, below, True, False, 440) for said in ("One line.", "Five lines of narration above. " * 20)]
    assert wide[0].split and wide[0].height > wide[1].height and all(f.figure_bottom <= SCREEN[1] - FOLD for f in wide)
    assert plan("word " * 2000, below, False, False, 620).text_bottom > SCREEN[1]  # too long to fit: told, not hidden
    assert TOP + short.height <= SCREEN[1] - FOLD
