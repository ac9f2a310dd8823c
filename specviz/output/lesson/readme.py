"""The README's table of the four questions, generated from the lesson file: one row per method stop.

`python -m specviz lesson readme` rewrites the block between the two markers; a test checks that the README's
block is what this writes, so the table never drifts from the lesson.
"""

from __future__ import annotations

from pathlib import Path

from specviz.core.paths import REPO
from specviz.output.lesson.model import Lesson
from specviz.output.lesson.parts import table

README = REPO / "README.md"
START, END = "<!-- lesson-questions:start -->", "<!-- lesson-questions:end -->"


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


def current(path: Path = README) -> str | None:
    """The README's block as it stands (None when the markers are missing)."""
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return None
    return text[text.index(START) : text.index(END) + len(END)]


def write(lesson: Lesson, path: Path = README) -> bool:
    """Rewrite the README's block from the lesson; False when it has no markers to write between."""
    text, old = path.read_text(encoding="utf-8"), current(path)
    if old is None:
        return False
    path.write_text(text.replace(old, block(lesson)), encoding="utf-8")
    return True
