"""Slide decks: figures as a .pptx, one per slide with a title, each drawn at the size it takes on a 1600 × 900
screen in the projector's type, and the provenance in the notes."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz.core.measure import Provenance
from specviz.output.export import figure_bytes
from specviz.output.viz.theme import BADGE

SLIDE_IN = (13.333, 7.5)  # 16:9, PowerPoint's widescreen size in inches
TITLE_TOP_IN, TITLE_H_IN, MARGIN_IN = 0.2, 1.0, 0.25
TEXT_H_IN = 1.15  # a slide's text under its title (a lesson stop's narration: three or four lines at 16 pt)
# a figure is drawn at the size its picture takes on the slide shown on a 1600 × 900 screen (120 px an inch), in
# the projector's type (no text under 16 px there), and rendered at SCALE× that for a sharper screen
SCREEN_PX, SCALE = 1600, 3


class DeckError(ValueError):
    """A deck that cannot be written; the message says why."""


@dataclass(frozen=True)
class Slide:
    """One figure with its slide title (and subtitle), optionally a text under them, and the speaker notes."""

    title: str
    figure: go.Figure | None  # None: a slide of text alone (a lecture's opening, with its stops)
    notes: str = ""
    subtitle: str = ""
    text: str = ""  # sentences above the figure (a lesson stop's narration); the figure shrinks to make room
    text_pt: int = 16  # the text's size: smaller for the four questions' answers
    text_in: float = TEXT_H_IN  # the text's height (inches) above the figure


def split_title(fig: go.Figure, fallback: str) -> tuple[str, str]:
    """(title, subtitle) from a figure's title 'Main<br><sup>sub</sup>', tags removed; `fallback` if none."""
    text = fig.to_dict()["layout"].get("title", {}).get("text") or ""
    head, _, rest = text.partition("<br>")

    def plain(s: str) -> str:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())

    return plain(head) or fallback, plain(rest)


def placed(fig: go.Figure, width_in: float, height_in: float) -> go.Figure:
    """A copy of the figure as its slide shows it on a 1600 × 900 screen: as many px as it takes there, its type
    the projector's (theme.legible: 18 px, none under 16), white, without its title (the slide's)."""
    from specviz.output.viz import theme

    px = SCREEN_PX / SLIDE_IN[0]
    width, height = round(width_in * px), round(height_in * px)
    out = theme.without_title(theme.legible(fig, height=height), height)  # titled, a badge clears the subplots' titles
    return out.update_layout(width=width, height=height, paper_bgcolor="white", plot_bgcolor="white")


def render_png(fig: go.Figure) -> bytes:
    """A placed figure (placed()) as PNG, SCALE× its size on the screen."""
    return figure_bytes(fig, "png", slide=False, scale=SCALE)


def notes_text(where: Provenance, model: str, settings: dict[str, Any], live: bool = True) -> str:
    """Speaker notes: the model, the device and machine, the date and commit, then each setting on a line.

    `live`: the runs were measured here and now; otherwise they are saved traces, drawn (not measured) here.
    """
    stamp = f"{where.date} (commit {where.commit}, torch {where.torch}, load average {where.load})"
    lines = [f"Model: {model}", f"Device: {where.device}"]
    if live:  # cached runs may come from any session since the server booted: the stamp is the deck's, not theirs
        lines += [f"Machine: {where.machine}", f"Measured: on this server since it booted; deck built {stamp}"]
    else:
        lines += ["Measured: when the traces were saved (they do not record where or when)"]
        lines += [f"Drawn on: {where.machine}, {stamp}"]
    return "\n".join(lines + [f"{k}: {v}" for k, v in settings.items()])


def stored_measurement(fig: go.Figure, where: str) -> go.Figure:
    """Mark a figure as drawn from a stored measurement, `where` being its provenance (Provenance.describe())."""
    return fig.update_layout(meta={**_meta(fig), "measured": where})


def _meta(fig: go.Figure) -> dict[str, Any]:
    """What a figure says of itself in layout.meta (its provenance, where its badge goes), or nothing."""
    return fig.layout.meta if isinstance(fig.layout.meta, dict) else {}


# "measured on Intel(R) Xeon(R) Processor (2 cores), … on 2026-12-01" (after "the computer running specviz, " where
# it was measured where the app runs): a provenance's machine and day
MEASURED_ON = re.compile(r"measured on (?:the computer running specviz, )?(.+?) \(\d+ cores.*?\bon (\d{4}-\d{2}-\d{2})")


def machines(where: str) -> list[str]:
    """'AMD EPYC, 2026-12-04' for each machine and day a stored measurement's provenance names, once each."""
    return list(dict.fromkeys(f"{cpu}, {day}" for cpu, day in MEASURED_ON.findall(where)))


def badge(fig: go.Figure, text: str) -> go.Figure:
    """Pin where a figure's numbers come from in its top right corner (a stored figure's machines and days, or its
    published sources), so that on someone else's screen it never reads as measured there; a source a line, so
    it stays inside a narrow column. Above the plot, over any subplot titles there (theme.legible stacks it), or
    inside the plot's lower right corner where the figure says that corner is empty (`meta={"badge": "inside"}`)."""
    inside = _meta(fig).get("badge") == "inside"
    return fig.add_annotation(
        text=text.replace("; ", ";<br>"), name=BADGE,
        xref="paper", yref="paper", x=1, y=0 if inside else 1, xanchor="right", yanchor="bottom",
        showarrow=False, font={"size": 16}, bgcolor="#fff7ed", bordercolor="#9a3412", borderwidth=1, borderpad=4,
    )  # fmt: skip


def slides_of(figures: dict[str, go.Figure], notes: str, measured: dict[str, str] | None = None) -> list[Slide]:
    """One slide per named figure, titled by the figure (or its name). Its notes are `notes` (this session's model,
    device, machine, date and settings), except for a figure drawn from a stored measurement (`measured[name]`, or
    its stored_measurement mark): its notes give that measurement's own provenance instead."""
    out = []
    for name, fig in figures.items():
        title, sub = split_title(fig, name.replace("_", " "))
        own = (measured or {}).get(name) or _meta(fig).get("measured")
        text = f"Figure: {name}\n" + (
            f"From a stored measurement, {own}; not measured in this session." if own else notes
        )
        out.append(Slide(title, fig, text, sub))
    return out


SUBTITLE_PT, LINE = 14, 1.2  # a line is 1.2 × its type size tall
CHAR_EM, BOLD_EM = 0.55, 0.62  # a character's mean width in ems, generous (LibreOffice's fallback fonts run wide)


def lines_needed(text: str, pt: float, width_in: float = SLIDE_IN[0] - 2 * MARGIN_IN, em: float = CHAR_EM) -> int:
    """About how many lines `text` takes at `pt` points in a box `width_in` wide (each paragraph wraps apart)."""
    per_line = max(1, int(width_in * 72 / (pt * em)))
    return sum(max(1, -(-len(par) // per_line)) for par in text.split("\n"))


def title_fit(title: str, subtitle: str) -> tuple[int, str]:
    """The title's type size and the subtitle cut to the lines left, so neither runs out of the title's box."""
    room = TITLE_H_IN - 0.1  # the text frame's own insets
    for pt in (28, 24, 20):
        used = lines_needed(title, pt, em=BOLD_EM) * pt * LINE / 72
        if lines_needed(title, pt, em=BOLD_EM) == 1 or pt == 20:
            break
    left = int((room - used) // (SUBTITLE_PT * LINE / 72))
    if left <= 0 or not subtitle:
        return pt, ""
    per_line = int((SLIDE_IN[0] - 2 * MARGIN_IN) * 72 / (SUBTITLE_PT * CHAR_EM))
    cut = subtitle if len(subtitle) <= left * per_line else subtitle[: left * per_line - 1].rstrip() + "…"
    return pt, cut


def _title(slide: Any, s: Slide) -> None:
    from pptx.util import Inches, Pt

    box = slide.shapes.add_textbox(
        Inches(MARGIN_IN), Inches(TITLE_TOP_IN), Inches(SLIDE_IN[0] - 2 * MARGIN_IN), Inches(TITLE_H_IN)
    )
    tf = box.text_frame
    tf.word_wrap = True
    title_pt, subtitle = title_fit(s.title, s.subtitle)
    tf.text = s.title
    tf.paragraphs[0].font.size, tf.paragraphs[0].font.bold = Pt(title_pt), True
    if subtitle:
        p = tf.add_paragraph()
        p.text, p.font.size = subtitle, Pt(SUBTITLE_PT)
    if s.text:
        top, width = TITLE_TOP_IN + TITLE_H_IN, SLIDE_IN[0] - 2 * MARGIN_IN
        tall = s.text_in if s.figure is not None else SLIDE_IN[1] - top - MARGIN_IN
        frame = slide.shapes.add_textbox(Inches(MARGIN_IN), Inches(top), Inches(width), Inches(tall)).text_frame
        frame.word_wrap = True
        frame.text = s.text  # a newline starts a paragraph (a formula stands on its own line)
        for p in frame.paragraphs:
            p.font.size = Pt(s.text_pt)


def _notes(slide: Any, notes: str) -> None:
    if (frame := slide.notes_slide.notes_text_frame) is not None:
        frame.text = notes


def picture(s: Slide) -> tuple[int, int, int]:
    """(top, width, height) in EMU of a slide's figure: under its title and text, down to the margin, 16:9."""
    from pptx.util import Inches

    # in EMU, as the boxes above were placed: the picture starts where the text ends, not a unit above it
    top = Inches(TITLE_TOP_IN) + Inches(TITLE_H_IN) + (Inches(s.text_in) if s.text else 0)
    height = Inches(SLIDE_IN[1] - MARGIN_IN) - top
    return top, int(height * 16 / 9), height


def picture_px(s: Slide) -> tuple[int, int]:
    """(width, height) of a slide's figure in px on a 1600 × 900 screen: the size placed() draws it at."""
    _top, width, height = picture(s)
    px = SCREEN_PX / SLIDE_IN[0] / 914400  # EMU an inch
    return round(width * px), round(height * px)


def deck_bytes(slides: Iterable[Slide], render: Callable[[go.Figure], bytes] | None = None) -> bytes:
    """The .pptx file: per slide a title (and its text), the figure's image below, centred at 16:9, and the notes.

    `render` turns a placed figure (placed()) into PNG bytes (default: render_png, through kaleido).
    """
    from pptx import Presentation
    from pptx.util import Emu, Inches

    render = render or render_png
    slides = list(slides)
    if not slides:
        raise DeckError("There are no figures to put in a deck.")
    prs = Presentation()
    prs.slide_width, prs.slide_height = Inches(SLIDE_IN[0]), Inches(SLIDE_IN[1])
    for s in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[6])  # the blank layout
        _title(slide, s)
        if s.figure is None:
            _notes(slide, s.notes)
            continue
        top, width, height = picture(s)
        image = io.BytesIO(render(placed(s.figure, width / Inches(1), height / Inches(1))))
        left = Emu((Inches(SLIDE_IN[0]) - width) // 2)
        slide.shapes.add_picture(image, left, Emu(top), Emu(width), Emu(height))
        _notes(slide, s.notes)
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def write_deck(path: Path, slides: Iterable[Slide], render: Callable[[go.Figure], bytes] | None = None) -> Path:
    """Write the deck to `path` (which must end in .pptx)."""
    if path.suffix.lower() != ".pptx":
        raise DeckError(f"A slide deck is written as .pptx; {path.name} has another suffix.")
    path.write_bytes(deck_bytes(slides, render))
    return path
