"""The README's lesson blocks, generated: the table of the four questions from the lesson file (one row per method
stop) and the account of the shipped recording from the pack (where, when, under what load, how many runs).

`python -m specviz lesson readme` rewrites each block between its two markers; a test checks that the README's
blocks are what this writes, so neither drifts from the lesson or from its recording.
"""

from __future__ import annotations

from pathlib import Path

from specviz.core.paths import REPO
from specviz.output.lesson.model import Lesson
from specviz.output.lesson.pack import Pack
from specviz.output.lesson.parts import table

README = REPO / "README.md"
START, END = "<!-- lesson-questions:start -->", "<!-- lesson-questions:end -->"
RECORDING = ("<!-- lesson-recording:start -->", "<!-- lesson-recording:end -->")


def _esc(text: str) -> str:
    return text.replace("|", "\\|")


def questions_table(lesson: Lesson) -> str:
    """Every stop that answers the four questions, in the lesson's order, with its lecture."""
    rows = []
    for stop in lesson.stops:
        if stop.questions:
            lec = lesson.lecture_of(stop.id)
            rows.append((stop.title, lec.title if lec else "", stop.questions))
    return table(rows, _esc)


def block(lesson: Lesson) -> str:
    """The README's block: the markers around the generated table."""
    return f"{START}\n{questions_table(lesson)}{END}"


def recording(pack: Pack) -> str:
    """The README's account of the shipped recording, from the pack itself: its machine, day, load and runs."""
    said = pack.brief()  # "Recorded on 2026-12-05 on a 2-core …"
    text = f"The shipped recording, `docs/lesson/pack.json`, was {said[0].lower()}{said[1:]}."
    return f"{RECORDING[0]}\n  {text}\n{RECORDING[1]}"


def current(path: Path = README, markers: tuple[str, str] = (START, END)) -> str | None:
    """A block of the README as it stands (None when its markers are missing)."""
    text, (start, end) = path.read_text(encoding="utf-8"), markers
    if start not in text or end not in text:
        return None
    return text[text.index(start) : text.index(end) + len(end)]


def write(lesson: Lesson, pack: Pack, path: Path = README) -> bool:
    """Rewrite the README's blocks from the lesson and its recording; False when a block's markers are missing."""
    text = path.read_text(encoding="utf-8")
    for markers, new in (((START, END), block(lesson)), (RECORDING, recording(pack))):
        old = current(path, markers)
        if old is None:
            return False
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return True
