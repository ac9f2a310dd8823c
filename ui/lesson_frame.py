"""How a recorded stop fills the 1600 × 900 screen it is laid out for: under the banner's header, its narration, its
figure, and its numbers and caption, estimated from their text so that the figure takes the height left and
nothing runs past the fold (the numbers go under the figure when the narration's column has no room for them)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from specviz.output.lesson.model import PAGES

SCREEN = (1600, 900)  # px: the projector's screen, presentation mode's type (html at 20 px)
TOP, FOLD = 268, 10  # px: the stop's body starts under its header and the recording's row; kept clear of the fold
BOX = 1460  # px: the banner's inner width; its columns have a 20 px gap
GAP = 20  # px between two blocks of a column (1rem)
EM = 0.47  # a character's mean width in ems: 0.43-0.45 measured on the lesson's prose, numbers and captions
TEXT, CAPTION = (21.6, 31.3), (20.0, 32.0)  # (font, line) px: narration and numbers (1.08rem, 1.45); a caption
BOXED = (34, 40)  # px a warning's box adds to its lines' height, and takes from the column's width
FOLDED = (25, 64)  # px a closed expander's box (the answer the runs wrote) adds to its label's, and takes
LEFT = ("numbers", "warnings")  # under a wide figure, beside the caption and the answer
LEAST = 280  # px: the least height a figure is given; a stop that would need less is told by the layout test

# figures that need the stop's whole width, as their pages declare them: the narration goes above them
WIDE = {f.name for p in PAGES.values() for f in p.figures if f.wide}


@dataclass(frozen=True)
class Block:
    """A part shown under the narration or the figure: which (numbers, warnings, caption, answer), what it says,
    its (font, line) px, and the px its box adds."""

    kind: str
    text: str
    type: tuple[float, float] = TEXT
    pad: float = 0.0
    inset: float = 0.0  # px of the column's width its box takes from its text (a warning's, an expander's padding)


@dataclass(frozen=True)
class Frame:
    """Where a stop's parts go: the figure's height, the kinds of block under it (the rest under the narration),
    and the bottom (px from the screen's top) of the narration's column and of the figure's."""

    height: int
    under: frozenset[str]
    text_bottom: float
    figure_bottom: float
    split: bool = False  # the blocks under the figure in two columns: numbers and warnings | caption and answer

    def fits(self) -> bool:
        return max(self.text_bottom, self.figure_bottom) <= SCREEN[1] - FOLD and self.height >= LEAST


# the cost model's α slider (its label, track and ends: 100 px) and the sentence under it (lesson_index.alpha_control)
SAID_OF_ALPHA = "At α = 0.33, with the trained draft's c = 0.05: best γ = 4, 1.52× in the model; speculation pays."
ALPHA = Block("alpha", SAID_OF_ALPHA, TEXT, 100 + GAP)


def widths(wide: bool, asking: bool) -> tuple[float, float]:
    """(the narration's, the figure's) column widths: side by side 2:5 (5:7 with the four questions), or the box's."""
    if wide:
        return BOX, BOX
    left, right = (5, 7) if asking else (2, 5)
    return (BOX - GAP) * left / (left + right), (BOX - GAP) * right / (left + right)


def plain(text: str) -> str:
    """What a markdown text shows: no emphasis marks, links' words; a displayed formula as two lines' height."""
    text = re.sub(r"\$\$.*?\$\$", "\n·\n·\n", text, flags=re.S)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[*_`$\\]", "", text)


def tall(b: Block, width: float) -> float:
    """The block's height in a column `width` px wide: its lines wrapped at words (each line break its own), a
    gap between paragraphs."""
    font, line = b.type
    per = max(1, int((width - b.inset) / (EM * font)))
    paragraphs = [p for p in re.split(r"\n\s*\n", plain(b.text)) if p.strip()]
    lines = sum(len(textwrap.wrap(part, per)) or 1 for p in paragraphs for part in p.split("\n") if part.strip())
    return lines * line + GAP * max(0, len(paragraphs) - 1) + b.pad


def stack(blocks: list[Block], width: float) -> float:
    """The height of blocks one under another (a gap between two)."""
    return sum(tall(b, width) for b in blocks) + GAP * max(0, len(blocks) - 1)


def plan(said: str, below: list[Block], wide: bool, asking: bool, most: int, pinned: tuple[Block, ...] = ()) -> Frame:
    """Where a stop's parts go and how tall its figure is (at most `most` px): the narration `said` above the
    figure (`wide`, the blocks under it) or beside it, the blocks (`below`, in order) split between the
    narration's column and the figure's so that the figure keeps the most height; `pinned` ends the narration's
    column whatever the split (a control drawn there)."""
    room, (text_w, fig_w) = SCREEN[1] - FOLD - TOP, widths(wide, asking)
    told = stack([Block("said", said), *pinned], text_w)
    if wide:  # the narration, the figure, and under it its numbers beside its caption
        halves = [[b for b in below if (b.kind in LEFT) == left] for left in (True, False)]
        under = max(stack(h, (fig_w - GAP) / 2) for h in halves) + GAP if below else 0.0
        height = int(min(most, room - told - GAP - under))
        bottom = TOP + told + GAP + height + under
        return Frame(height, frozenset(b.kind for b in below), bottom, bottom, split=True)
    found = []
    for k in range(len(below) + 1):  # the first k beside and the rest under, or the first k under and the rest beside
        for beside, under in ((below[:k], below[k:]), (below[k:], below[:k])):
            text = told + (GAP + stack(beside, text_w) if beside else 0.0)
            low = stack(under, fig_w) + GAP if under else 0.0
            height = int(min(most, room - low))
            found.append(Frame(height, frozenset(b.kind for b in under), TOP + text, TOP + height + low))
    # the least text past the fold and figure under LEAST, then the tallest figure
    return min(found, key=lambda f: (max(0.0, f.text_bottom - TOP - room) + max(0, LEAST - f.height), -f.height))


def blocks(numbers: list[str], warnings: list[str], caption: str, answer: str) -> list[Block]:
    """The numbers (a line each), the failing checks' warnings, the caption and, for a stop's runs, the answer
    they wrote (a closed expander, `answer` its label), in the order they are shown."""
    out = [Block("numbers", "\n".join(numbers))] if numbers else []
    pads = BOXED[0] * len(warnings) + GAP * max(0, len(warnings) - 1)
    out += [Block("warnings", "\n".join(warnings), TEXT, pads, BOXED[1])] if warnings else []
    out += [Block("caption", caption, CAPTION)] if caption else []
    return out + ([Block("answer", answer, TEXT, *FOLDED)] if answer else [])


def frame_of(
    pack: Any, lesson: Any, stop: Any, asking: bool, most: int, below: tuple[list[str], list[str], str]
) -> Frame:
    """Where a recorded stop's parts go (plan()), from what it shows: its narration (or its questions answered,
    `asking`), and `below` it its numbers, its failing checks' warnings and its caption."""
    from ui.lesson_index import ALPHA_FIGURE

    group = pack.group(stop)
    shown = blocks(*below, answer=answer_label(group) if group is not None else "")
    pinned = (ALPHA,) if stop.figure == ALPHA_FIGURE else ()  # the α slider ui.lesson's focus draws beside
    return plan(said(pack, lesson, stop, asking), shown, wide(stop.figure), asking, most, pinned)


def said(pack: Any, lesson: Any, stop: Any, asking: bool) -> str:
    """The text the banner shows beside or above the stop's figure: its narration told from the recording (as
    ui.lesson's banner tells it, from the same memo), or on a method stop's last click its four questions answered."""
    from specviz.output.lesson import facts
    from specviz.output.lesson.formulas import display_math
    from ui import lesson_index
    from ui.memo import shared

    if asking:
        return lesson_index.asked(lesson_index.answers_of(lesson, stop, pack))
    whole = lesson.stops[lesson.index(stop.id)]
    return display_math(shared(("told", repr(whole)), [pack], lambda: facts.narrate(pack, whole).text))


def wide(figure: str) -> bool:
    """Whether a figure takes the stop's whole width, its narration above it (as its page declares it)."""
    return figure in WIDE


def caption(pack: Any, lesson: Any, stop: Any, fig: Any, measured: str) -> tuple[str, str | None]:
    """The caption under a recorded stop's numbers (where and how its figure was made), and its longer form for
    hover (None when it is all said)."""
    from specviz.output.lesson.pages import COMPUTED
    from specviz.output.lesson.visitor import escaped
    from specviz.output.viz.theme import BADGE

    group = pack.group(stop)
    if group is not None:
        t = f"{pack.settings.get('max_new_tokens')} new tokens, T = {group.temperature:g}"
        return f"Prompt: the shipped {lesson.prompt_label(stop)!r} ({stop.prompt}), {t}.", None
    measured = escaped(measured, 1000)  # where a visitor's pack says it was measured
    said = f"From a stored measurement, {measured}." if measured else "Run once for the recording."
    if stop.figure in COMPUTED:  # arithmetic, or a model over stored measurements: said as such
        said = f"Computed: {measured}." if measured else "Computed: exact arithmetic on the example, no run."
    short = said if len(said) <= 200 else "From stored measurements; where and when each was made: hover."
    if any(a.name == BADGE for a in fig.layout.annotations):  # the figure names them already: said once there
        how = "Drawn from stored measurements" if stop.figure in COMPUTED else "From a stored measurement"
        short = f"{how}; the badge names where and when, the rest: hover."
    return short, said if short != said else None


def answer_label(group: Any) -> str:
    """What the folded answer under a stop's numbers says of it."""
    said = "every method wrote it" if group.temperature == 0 else "plain decoding's, sampled"
    return f"The answer: {group.runs['ar'][0].new_tokens} tokens, {said}"
