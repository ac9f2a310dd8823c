"""The recorded lesson as slides: a lecture's opening slide (its stops, the index), then per stop one slide per
build (consecutive, the clicker's order), and for a method stop its four questions answered with the measured
cost; formulas written in plain Unicode, every check with the figure deciding it in the notes."""

from __future__ import annotations

from typing import Any

from specviz.core import measure
from specviz.output.deck import TEXT_H_IN, Slide, lines_needed, split_title
from specviz.output.lesson import facts
from specviz.output.lesson.formulas import plain_math
from specviz.output.lesson.model import PAGES, Lesson, Stop
from specviz.output.lesson.names import display, relabel
from specviz.output.lesson.pack import Group, Pack
from specviz.output.lesson.parts import ASKED

TEXT_MAX_IN = 2.1  # the most a slide's text may take before its figure gets too small


def fitted(text: str) -> tuple[int, float]:
    """(type size, height in inches) for a slide's text: 16 pt where it fits the usual box, else smaller."""
    for pt in (16, 15, 14, 13):
        tall = lines_needed(text, pt) * pt * 1.2 / 72 + 0.15
        if tall <= TEXT_H_IN or pt == 13:
            return pt, min(max(tall, TEXT_H_IN if pt == 16 else tall), TEXT_MAX_IN)
    return 13, TEXT_MAX_IN


def subtitle(fig: Any) -> str:
    """A figure's own subtitle (its title's <sup> part: where it was measured, what it shows), never the rest of a
    title wrapped onto a second line."""
    text = str(fig.layout.title.text or "")
    return split_title(fig, "")[1] if "<sup>" in text else ""


def cost_line(stop: Stop, group: Group | None) -> str:
    """'Measured: propose 4.0 ms + verify 113 ms a step (medians), plain decoding's step 77 ms: r 1.57'."""
    name = facts.main_method(stop) or next((m for m in stop.methods if m != "ar"), None)
    if group is None or name is None or name not in group.runs:
        return ""
    run, ar = group.median(name), facts.traces(group)["ar"]
    steps = [s for s in run.steps if s.forward_tokens > 0 and s.detail is not None] or run.steps
    med = lambda xs: 1000 * measure.spread(list(xs)).median  # noqa: E731
    plain = med(s.wall_s for s in ar.steps if s.forward_tokens > 0)
    r = group.numbers(name)["r"].median
    return (
        f"Measured ({display(name)}): propose {med(s.propose_s for s in steps):.1f} ms + verify "
        f"{med(s.verify_s for s in steps):.1f} ms a step (medians), against {plain:.1f} ms for a plain step: r {r:.2f}"
    )


def accepted_line(stop: Stop, group: Group | None) -> str:
    """'The step shown: 2 of 3 drafts accepted, 3 tokens committed'."""
    step = facts.shown_step(stop, group) if group is not None else None
    if step is None:
        return ""
    return (
        f"The step shown (step {step.index}): {step.drafts_accepted} of {step.proposed} drafts accepted, "
        f"{step.accepted} token(s) committed"
    )


def answers(stop: Stop, group: Group | None) -> list[tuple[str, str]]:
    """(question, answer) for a method stop, the measured lines added to 'accepted' and 'cost'."""
    said = dict(stop.questions)
    extra = {"accepted": accepted_line(stop, group), "cost": cost_line(stop, group)}
    return [(ASKED[q], " ".join(x for x in (a, extra.get(q, "")) if x)) for q, a in said.items()]


def opening(lesson: Lesson, lecture_id: str, title: str, stops: tuple[str, ...]) -> Slide:
    """A lecture's first slide: its title and its stops, numbered (the deck's index)."""
    by_id = {s.id: s for s in lesson.stops}
    text = "\n".join(f"{k}. {by_id[i].title}" for k, i in enumerate(stops, 1) if i in by_id)
    return Slide(title, None, f"Lecture {lecture_id!r}: {len(stops)} stops", lesson.title, text, 15)


def _notes(pack: Pack, lesson: Lesson, stop: Stop, k: int, measured: str) -> list[str]:
    group = pack.group(stop) if stop.figure not in facts.COMPUTED else None
    lines = [f"Stop {k} of {len(lesson.stops)} ({stop.id}), the {PAGES[stop.page].title} page, figure {stop.figure}"]
    lines.append(f"R{pack.where()[1:]}; model {pack.settings.get('model')}")  # 'Recorded on …
    if measured:
        lines.append(f"From a stored measurement, {measured}")
    if group is not None:
        lines.append(f"Prompt: {lesson.prompt_label(stop)} (shipped, id {stop.prompt}), T = {group.temperature:g}")
        lines += facts.numbers(stop, group)
        lines.append(
            f"The answer (plain decoding's, {group.runs['ar'][0].new_tokens} tokens): {group.runs['ar'][0].text}"
        )
    return lines + [f"Check: {v.line()}" for v in facts.check(pack, stop)]


def stop_slides(pack: Pack, lesson: Lesson, stop: Stop, k: int) -> list[Slide]:
    """The stop's builds as consecutive slides (the narration on the first), then its four questions."""
    out: list[Slide] = []
    group = pack.group(stop) if stop.figure not in facts.COMPUTED else None
    for b in range(stop.frames):
        at = stop.at(b)
        fig, measured = facts.figure(pack, at)
        fig = relabel(fig)
        notes = "\n".join([*_notes(pack, lesson, stop, k, measured), f"Build {b + 1} of {stop.frames}"])
        if b == 0:  # the narration on the stop's first slide; a build's slide gives its figure the room
            said = plain_math(facts.narrate(pack, stop).text)
            pt, tall = fitted(said)
            out.append(Slide(at.title, fig, notes, subtitle(fig), said, pt, tall))
        else:
            out.append(Slide(at.title, fig, notes, subtitle(fig) or f"{b + 1} of {stop.frames}: {stop.title}"))
    if stop.questions:
        last = out[-1]
        text = "\n".join(f"{q} {a}" for q, a in answers(stop.at(stop.frames - 1), group))
        pt, tall = fitted(text)
        title = f"{stop.title.split(':')[0]}: the four questions"
        out.append(Slide(title, last.figure, last.notes, last.subtitle, text, pt, tall))
    return out


def pack_slides(pack: Pack, lesson: Lesson, lecture: str | None = None) -> list[Slide]:
    """The lesson (or one lecture of it) from a recorded pack: each lecture's opening, then its stops' slides;
    a lesson without lectures is its stops' slides alone."""
    chosen = [lec for lec in lesson.lectures if lecture in (None, "", "all", lec.id)]
    runs: list[tuple[Any, tuple[str, ...]]] = [(lec, lec.stops) for lec in chosen]
    placed = {i for lec in lesson.lectures for i in lec.stops}
    rest = tuple(s.id for s in lesson.stops if s.id not in placed)  # stops in no lecture: after them all
    if rest and lecture in (None, "", "all"):
        runs.append((None, rest))
    by_id, out = {s.id: s for s in lesson.stops}, []
    for lec, ids in runs:
        if lec is not None:
            out.append(opening(lesson, lec.id, lec.title, lec.stops))
        for i in ids:
            out += stop_slides(pack, lesson, by_id[i], lesson.stops.index(by_id[i]) + 1)
    return out
