"""The lesson's index (jump to any stop, grouped by lecture), the clicker's walk through a stop's builds, and a
method stop's four questions answered under its figure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from specviz.output.lesson.model import Lesson, Stop
from specviz.output.lesson.parts import walk

BUILD = "lesson.build"  # which of the stop's figures is shown (0: its own, then its builds)
ALPHA_FIGURE = "sps_cost_model"  # the stop whose figure gets the α slider beside it


def build() -> int:
    return int(st.session_state.get(BUILD, 0))


def step(lesson: Lesson, at: int, delta: int) -> tuple[int, int]:
    """(stop, click) one click on from the stop `at` at the current click (its figures, then its questions)."""
    counts = [s.clicks for s in lesson.stops]
    return walk(counts, (at, min(build(), counts[at] - 1)), delta)


def header(box: Any, lesson: Lesson, at: tuple[int, int], enter: Callable[..., None], move: Callable) -> None:
    """The banner's first row: 'Stop 4 of 22 · 2 of 4 · <title>' and the lecture, the index, ◀ and ▶."""
    i, b = at
    whole = lesson.stops[i]
    title = whole.at(b).title if b < whole.frames else f"{whole.title.split(':')[0]}: the four questions"
    head, where, back, ahead = box.columns([9, 2, 1, 1], vertical_alignment="center")
    lec = lesson.lecture_of(whole.id)
    built = f" · {b + 1} of {whole.clicks}" if whole.clicks > 1 else ""
    head.markdown(f"**Stop {i + 1} of {len(lesson.stops)}**{built} · **{title}**" + (f"  \n{lec.title}" if lec else ""))
    index(where, lesson, i, enter)
    back.button("◀", key="lesson_prev", on_click=move, args=(-1,), disabled=i == 0 and b == 0, help="Back (PageUp, ←)")
    last = i == len(lesson.stops) - 1 and b == whole.clicks - 1
    ahead.button("▶", key="lesson_next", on_click=move, args=(1,), disabled=last, help="On (PageDown, →)")


def asked(answers: list[tuple[str, str]]) -> str:
    """The four questions and their answers as the stop's text."""
    return "\n\n".join(f"**{q}** {a}" for q, a in answers)


def index(box: Any, lesson: Lesson, at: int, enter: Callable[..., None]) -> None:
    """A popover listing every stop by lecture (stops in none listed last); a click goes there."""
    pop = box.popover("Index", help="Every stop of the lesson, by lecture: click one to go there")
    groups = [(lec.title, lec.stops) for lec in lesson.lectures]
    rest = tuple(s.id for s in lesson.stops if not any(s.id in ids for _t, ids in groups))
    for title, ids in [*groups, *([("More stops", rest)] if rest else [])]:
        pop.markdown(f"**{title}**")
        for k, sid in enumerate(ids, 1):
            i = lesson.index(sid)
            mark = "▶ " if i == at else ""
            pop.button(
                f"{mark}{k}. {lesson.stops[i].title}",
                key=f"lesson.index.{sid}",
                on_click=enter,
                args=(lesson, i),
                type="tertiary",
            )


def answers_of(lesson: Lesson, stop: Stop, pack: Any) -> list[tuple[str, str]]:
    """The stop's answers, with the measured lines from the recording when one is replayed."""
    from specviz.output.lesson.parts import ASKED
    from specviz.output.lesson.slides import answers

    if not stop.questions:
        return []
    if pack is None:
        return [(ASKED[q], a) for q, a in stop.questions]
    try:
        return answers(stop, pack.group(stop))
    except (KeyError, ValueError, IndexError):
        return [(ASKED[q], a) for q, a in stop.questions]


def alpha_control(side: Any, stop: Stop) -> None:
    """On the cost model's stop: a slider for α, and what the trained draft's measured c would make of it."""
    if stop.figure != ALPHA_FIGURE:
        return
    from specviz.output.lesson import formulas

    try:
        trained = next(d for d in formulas.drafts()[0] if d.name == "trained")
    except (OSError, ValueError, KeyError, StopIteration):
        return
    alpha = side.slider(
        "α: an acceptance rate to try",
        0.0,
        0.95,
        round(trained.alpha, 2),
        0.01,
        key="lesson.alpha",
        help="The cost model at the trained draft's measured c and verify cost: where speculation starts to pay.",
    )
    gamma, speedup = formulas.best(alpha, trained.c, trained.v)
    pays = "pays" if speedup > 1.0 else "does not pay"
    side.markdown(
        f"At α = {alpha:.2f}, with the trained draft's c = {trained.c:.2f}: best γ = {gamma}, "
        f"{speedup:.2f}× in the model; speculation {pays}."
    )
