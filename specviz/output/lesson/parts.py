"""The parts of a lesson beyond its stops: lectures (named runs of stops), builds within a stop (the figures the
clicker walks before the next stop) and the four questions a method stop answers.

Read from the lesson file by output/lesson.py: `[[lecture]]` tables (id, title, stops = [ids]) at the top, and
on a stop `builds = [{ figure = "...", title = "..." }]` and `questions = { drafts = "…", verified = "…",
accepted = "…", cost = "…" }`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

QUESTIONS = ("drafts", "verified", "accepted", "cost")  # the four questions, in the order a lecturer asks them
ASKED = {
    "drafts": "Where do the drafts come from?",
    "verified": "How are they verified?",
    "accepted": "What is accepted?",
    "cost": "What does a step cost?",
}
MAX_BUILDS, MAX_ANSWER, MAX_LECTURES = 6, 260, 8


class PartError(ValueError):
    """A lecture, build or question that cannot be used: one sentence, its place named by the caller."""


@dataclass(frozen=True)
class Build:
    """One figure of a stop that the clicker walks to before the next stop, with the slide's title for it."""

    figure: str
    title: str


@dataclass(frozen=True)
class Lecture:
    """A named run of stops (by id), e.g. 'How the methods work'."""

    id: str
    title: str
    stops: tuple[str, ...]


def _words(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PartError(f"{what} must be non-empty text")
    if len(value) > limit:
        raise PartError(f"{what} is {len(value)} characters long; at most {limit} fit")
    return " ".join(value.split())


def builds(raw: Any, figures: Sequence[str], title: str) -> tuple[Build, ...]:
    """A stop's builds: a list of {figure, title} tables, each figure one its page draws."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_BUILDS:
        raise PartError(f"'builds' must be a list of at most {MAX_BUILDS} tables {{ figure, title }}")
    out = []
    for b in raw:
        if not isinstance(b, dict) or set(b) - {"figure", "title"} or b.get("figure") not in figures:
            raise PartError(f"a build is {{ figure, title }} with a figure among {', '.join(figures)}, not {b!r}")
        out.append(Build(b["figure"], _words(b.get("title", title), "a build's title", 90)))
    return tuple(out)


def questions(raw: Any) -> tuple[tuple[str, str], ...]:
    """A stop's answers to the four questions, in their order; a stop answers all four or none."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != set(QUESTIONS):
        raise PartError(f"'questions' must answer all four: {', '.join(QUESTIONS)}")
    return tuple((q, _words(raw[q], f"the answer to {q!r}", MAX_ANSWER)) for q in QUESTIONS)


def lectures(raw: Any, ids: Sequence[str]) -> tuple[Lecture, ...]:
    """The lesson's lectures; each stop id named must be a stop, and no stop is in two lectures."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_LECTURES:
        raise PartError(f"'lecture' must be at most {MAX_LECTURES} [[lecture]] tables")
    out, seen = [], set()
    for i, lec in enumerate(raw, 1):
        if not isinstance(lec, dict) or set(lec) != {"id", "title", "stops"}:
            raise PartError(f"lecture {i} must have exactly id, title and stops")
        names = lec["stops"]
        if not isinstance(names, list) or not names or any(n not in ids for n in names):
            raise PartError(f"lecture {i}: 'stops' must list stop ids of this lesson")
        if twice := seen & set(names):
            raise PartError(f"lecture {i}: stop {sorted(twice)[0]!r} is already in another lecture")
        seen |= set(names)
        out.append(
            Lecture(_words(lec["id"], "a lecture's id", 40), _words(lec["title"], "its title", 90), tuple(names))
        )
    return tuple(out)


def walk(counts: Sequence[int], at: tuple[int, int], delta: int) -> tuple[int, int]:
    """(stop, build) one click on from `at` (delta ±1): through a stop's builds, then to the next stop's first
    (or back to the previous stop's last); it stays put at either end. `counts`: each stop's number of frames."""
    stop, build = at
    build += delta
    if 0 <= build < counts[stop]:
        return stop, build
    stop += delta
    if not 0 <= stop < len(counts):
        return at
    return stop, 0 if delta > 0 else counts[stop] - 1


def table(rows: Sequence[tuple[str, str, Sequence[tuple[str, str]]]], esc: Callable[[str], str]) -> str:
    """A markdown table: one row per method stop (its title and lecture), a column per question."""
    head = "| stop | lecture | " + " | ".join(ASKED[q] for q in QUESTIONS) + " |"
    lines = [head, "|" + "---|" * (len(QUESTIONS) + 2)]
    for title, lecture, answers in rows:
        cells = [esc(a) for _q, a in answers]
        lines.append(f"| {esc(title)} | {esc(lecture)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
