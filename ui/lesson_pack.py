"""The lesson replayed from a recorded pack: each stop's runs, figure, numbers and checks with no model; one
button per stop measures it again live (labelled live).

The shipped pack (docs/lesson/pack.json) opens with the lesson (or `?pack`); the sidebar takes another pack
file. While a stop replays, its page below draws the same runs (ui.resources.PACK), so it shows the same numbers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import streamlit as st

from specviz.output.lesson import facts as lesson_facts
from specviz.output.lesson.model import Lesson, LessonError, Stop
from specviz.output.lesson.pack import MAX_PACK_BYTES, PACK_FILE, Pack, fit
from specviz.output.lesson.pages import COMPUTED
from specviz.output.lesson.visitor import escaped
from ui import lesson_frame, resources
from ui.memo import private, shared

ON, UPLOAD, LIVE, LOADED = "lesson.pack", "lesson.pack_file", "lesson.live", "lesson.pack_loaded"
NOTE = "lesson.pack_note"  # why the address's recording is not replayed, said once on the stop
RULE = "lesson.step_rule"  # the stop's rule for the step in focus, while a lesson stop is shown
ERROR = "lesson.pack_error"  # why the visitor's upload was refused, said once under the uploader
# a recorded stop is its slide (figure, narration, numbers): its page's other figures, drawn again from the same
# runs, were most of the browser's work of a press (docs/experiments/2026-12-06-lesson-load-*.json), so the page
# runs under a recorded stop only when a visitor asks for it; a live stop always runs it (its figure comes from it)
PAGE_BELOW = "lesson.page_below"
PAGE_HELP = (
    "The stop's page under its slide: its controls and every other figure, drawn from the same recorded runs. Off, "
    "a press draws the slide alone (a class of ten on one server moves through the stops several times faster)."
)
# what a pack that passed its schema can still raise while it is drawn: caught at the route, banner and focus, said
# in one sentence, with the sidebar drawn (its switch turns the recording off)
PACK_ERRORS = (
    LessonError,
    ArithmeticError,
    AttributeError,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    RecursionError,
)
SHOWN = 300  # characters of a message about a visitor's recording shown back (escaped)
MISFIT = 600  # of one saying which stops a recording lacks, or holds that the lesson does not (lesson.pack.fit)


def refused(place: Any, exc: BaseException) -> None:
    """One sentence on `place` for what the recording could not draw, its text escaped."""
    why = escaped(f"{type(exc).__name__}: {exc}", SHOWN)
    place.warning(f"This recording cannot draw the stop ({why}); switch the replay off in the sidebar to run it live.")


def step_rule() -> str:
    """The rule a page's step slider opens by: the lesson stop's (focus.STEP_RULES), else the longest path."""
    return str(st.session_state.get(RULE) or "longest")


def current(lesson: Lesson) -> Pack | None:
    """The pack the lesson replays, fitted to it (a visitor's upload, else the shipped one), None when off,
    unreadable or the recording of another lesson (one without a stop of this one: `fitted` says which)."""
    return fitted(lesson)[0]


def fitted(lesson: Lesson) -> tuple[Pack | None, str]:
    """The pack replayed for `lesson` (lesson.pack.fit: the stops and stored figures it does not draw dropped
    before any figure is validated, once per pack and lesson) and what fitting the visitor's, else the shipped
    one, found ('' when it is just the lesson's). A visitor's that does not fit gives way to the shipped one."""
    if not st.session_state.get(ON, PACK_FILE.is_file()):
        return None, ""
    said = ""
    if (loaded := st.session_state.get(LOADED)) is not None:
        try:
            if not (mine := fit(loaded, lesson)).lacks:
                return mine, mine.note()
            said = mine.note()
        except LessonError as exc:  # fitted to another lesson when uploaded: this one draws a figure it refuses
            said = f"{loaded.name} cannot be replayed for this lesson: {exc}"
    try:
        if PACK_FILE.is_file():
            shipped = fit(resources.pack(str(PACK_FILE), PACK_FILE.stat().st_mtime), lesson)
            return (None if shipped.lacks else shipped), said or shipped.note()
    except LessonError as exc:
        st.error(f"The recorded lesson cannot be replayed: {escaped(exc, SHOWN)}")
    return None, said


def open_named(name: str, lesson: Lesson) -> None:
    """?pack=<name>: a recording beside the shipped one (docs/lesson/<name>.json; a bare name, nothing else), said
    once on the stop when it cannot be replayed or does not fit the lesson (the shipped one then replays)."""
    st.session_state[ON] = True
    if not name or name == PACK_FILE.stem:
        return
    path = PACK_FILE.parent / f"{name}.json"
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) or not path.is_file():
        shown = escaped(repr(name[:64]), SHOWN)  # the address's text, never markdown in the app's own voice
        st.session_state[NOTE] = f"No recording {shown} here; the shipped one is replayed, if there is one."
        return
    try:
        pack = resources.pack(str(path), path.stat().st_mtime)
        if (lacks := fit(pack, lesson)).lacks:
            raise LessonError(f"{lacks.note()} The shipped one is replayed, if it fits.")
        st.session_state[LOADED] = pack
    except LessonError as exc:
        st.session_state[NOTE] = f"The recording {name!r} cannot be replayed: {escaped(exc, MISFIT)}"


def _uploaded(lessons: Callable[[], Lesson | None]) -> None:
    """A visitor's pack, read once when it is uploaded (its size first, then lesson.pack_schema's caps) and once
    per content on the server (resources.uploaded_pack), then fitted to the lesson (`lessons()`): its figures the
    lesson draws validated, and one that lacks a stop of the lesson refused, saying which (a stop never runs live
    because an upload lacked it). The session keeps the checked Pack, never the raw data."""
    f = st.session_state.get(UPLOAD)
    st.session_state.pop(LOADED, None)
    if f is None:
        return
    try:
        if f.size > MAX_PACK_BYTES:
            raise LessonError(f"{f.name} is larger than a pack may be ({MAX_PACK_BYTES >> 20} MB).")
        raw = f.getvalue()
        pack = resources.uploaded_pack(hashlib.sha256(raw).hexdigest(), f.name, raw)
        if (lesson := lessons()) is not None and (lacks := fit(pack, lesson)).lacks:
            raise LessonError(f"{lacks.note()} It is not replayed; the stops keep the recording they had.")
        st.session_state[LOADED] = pack
    except LessonError as exc:
        st.session_state[ERROR] = escaped((str(exc) or type(exc).__name__).splitlines()[0], MISFIT)


def controls(sb, lessons: Callable[[], Lesson | None]) -> None:
    """The sidebar's switch between the recording and live runs, another pack to replay (`lessons()`: the lesson it
    is fitted to), and what fitting it found: the stops it lacks, or those it holds that the lesson does not."""
    st.session_state.setdefault(ON, PACK_FILE.is_file())  # on by default wherever a recording ships
    sb.toggle(
        "Replay the recorded lesson",
        key=ON,
        help="Every stop drawn from one recording (python -m specviz lesson record): the same numbers at every "
        "stop, no model needed. Off: every stop runs live on this server.",
    )
    if st.session_state.get(ON, PACK_FILE.is_file()):
        sb.file_uploader("Another recording (.json)", type=["json"], key=UPLOAD, on_change=_uploaded, args=(lessons,))
        if err := st.session_state.pop(ERROR, None):
            sb.error(err)  # escaped when it was set
        elif (lesson := lessons()) is not None and (said := fitted(lesson)[1]):
            sb.caption(escaped(said, MISFIT))


def route(lesson: Lesson | None, stop: Stop | None) -> None:
    """Before the sidebar: the stop's recorded runs replace the model for the page (none when live or off); what a
    visitor's pack raises here, ui.lesson.route says in one sentence (PACK_ERRORS)."""
    st.session_state.pop(resources.PACK, None)
    pack = current(lesson) if lesson is not None and stop is not None else None
    if pack is None or stop is None or st.session_state.get(LIVE) == stop.id:
        return
    group = pack.nearest(stop)  # a stored stop's page replays its prompt's runs rather than run the model
    if group is not None:
        st.session_state[resources.PACK] = group.runs


def banner(box: Any, lesson: Lesson, stop: Stop) -> bool:
    """Under the stop's header: recorded (where, when) or live, and the button between them; True if replaying."""
    pack = current(lesson)
    live = pack is None or st.session_state.get(LIVE) == stop.id
    if note := st.session_state.pop(NOTE, None):
        box.warning(note)
    left, right = box.columns([4, 3], vertical_alignment="center")
    if pack is not None and not live and _stored(pack, stop):
        left.caption("From the recording: a figure of a stored measurement, where and when beside it.")
    elif pack is not None and not live:  # a visitor's pack says where it was recorded: shown as text
        left.caption(f"{escaped(pack.brief(_runs(pack, stop)), SHOWN)}.", help=escaped(pack.where(), SHOWN))
    if pack is not None and not live:  # on one line (wrapping in a narrow window), so the slide keeps its height
        row = right.container(horizontal=True, vertical_alignment="center", horizontal_alignment="right")
        row.button("Measure this stop again (live)", key="lesson.measure", on_click=_go_live, args=(stop.id,))
        row.toggle("Its page below", False, key=PAGE_BELOW, help=PAGE_HELP)
    elif pack is not None:
        left.caption("**Live**: measured now on this server, not the recording.")
        right.button("Back to the recording", key="lesson.recorded", on_click=_go_live, args=("",))
    return not live


def deck_button(lesson: Lesson) -> bool:
    """The sidebar's lesson deck written from the recording (no model); False when none is replayed."""
    if (pack := current(lesson)) is None:
        return False

    def deck() -> bytes:
        from specviz.output.deck import deck_bytes
        from specviz.output.lesson.deck import pack_slides

        return deck_bytes(pack_slides(pack, lesson))

    st.sidebar.download_button(
        f"Slide deck of the lesson ({len(lesson.stops)} slides, .pptx)",
        deck,
        file_name="specviz_lesson.pptx",
        mime="application/vnd.openxmlformats-officedocument.presentationml.presentation",
        key="lesson.deck",
        on_click="ignore",
        help="One slide per stop from the recording: its figure at 1600 × 900, its narration, and where and when "
        "it was recorded, its numbers and every check in the notes (python -m specviz export --lesson deck.pptx).",
    )
    return True


def _runs(pack: Pack, stop: Stop) -> str:
    """What the recording did for a stop drawn from none of its interleaved runs: computed (arithmetic or a model
    over the recording's curve and stored sweeps) or run once (the lab); '' for a stop of interleaved runs."""
    try:
        if pack.group(stop) is not None:
            return ""
    except PACK_ERRORS:
        return ""
    return "computed when shown, no run" if stop.figure in COMPUTED else "this figure run once"


def _stored(pack: Pack, stop: Stop) -> bool:
    """A stop whose figure is a stored measurement's (a bench, the cost curve), not one run for the recording."""
    try:
        return pack.group(stop) is None and bool(pack.stops[stop.id].get("measured"))
    except PACK_ERRORS:
        return False


def _room(fig: Any) -> Any:
    """Room above the plot for a title of several lines (a stored figure's subtitle), so none runs into it."""
    lines = str(fig.layout.title.text or "").count("<br>") + 1
    return fig.update_layout(margin={"t": max(fig.layout.margin.t or 0, 40 + 34 * lines)}) if lines > 1 else fig


def _go_live(stop_id: str) -> None:
    st.session_state[LIVE] = stop_id


def focus(lesson: Lesson, stop: Stop, side: Any, place: Any, height: int) -> None:
    """The stop's figure, numbers and failing checks, all from the recording (no model); one sentence in the
    figure's place for whatever a visitor's recording cannot draw."""
    pack = current(lesson)
    if pack is None:
        return
    try:
        _focus(pack, lesson, stop, side, place, height)
    except PACK_ERRORS as exc:  # a visitor's recording, not ours
        refused(place, exc)


def _replayed(pack: Pack, stop: Stop) -> tuple[Any, str, list[Any], list[str]]:
    """The stop's figure (relabelled; a stored one when the pack was read), where it was measured, its checks'
    verdicts and its numbers, from the recording."""
    fig, measured = lesson_facts.figure(pack, stop)
    group = pack.group(stop)
    lines = lesson_facts.numbers(stop, group) if group is not None else []
    return fig, measured, lesson_facts.check(pack, stop), lines


def _focus(pack: Pack, lesson: Lesson, stop: Stop, side: Any, place: Any, height: int) -> None:
    from ui import lesson_index, presentation

    # the figure, its checks and numbers depend on the recording and the stop alone: built once for every visitor
    fig, measured, verdicts, lines = shared(("focus", repr(stop)), [pack], lambda: _replayed(pack, stop))
    group = pack.group(stop)
    caption, told = lesson_frame.caption(pack, lesson, stop, fig, measured)
    warnings = [escaped(v.sentence(), SHOWN) for v in verdicts if v.holds is not True]  # a visitor's keys, maybe
    whole = lesson.stops[lesson.index(stop.id)]
    asking = min(lesson_index.build(), whole.clicks - 1) >= whole.frames
    frame = lesson_frame.frame_of(pack, lesson, stop, asking, height, (lines, warnings, caption))
    shown = presentation.figure_font(fig, frame.height) if presentation.presenting() else private(fig)
    shown = _room(shown.update_layout(height=frame.height))
    low = place = place.container() if frame.under else place  # what the narration's column has no room for
    place.plotly_chart(shown, key="lesson.figure", config={"displaylogo": False})
    at = {k: low if k in frame.under else side for k in ("numbers", "warnings", "caption", "answer")}
    if frame.split:  # under a wide figure: its numbers beside its caption
        at["numbers"], at["caption"] = low.columns(2)
        at["warnings"], at["answer"] = at["numbers"], at["caption"]
    if lines:
        at["numbers"].markdown("  \n".join(lines))
    for w in warnings:
        at["warnings"].warning(w)
    at["caption"].caption(caption, help=told)
    if group is not None:
        _answer(at["answer"], group)


def _answer(side: Any, group: Any) -> None:
    """The answer the stop's runs wrote (greedy: every method's, token for token), to read under the figure."""
    with side.expander(lesson_frame.answer_label(group)):
        st.code(group.runs["ar"][0].text[:4000], language=None, wrap_lines=True)  # a visitor's pack: text, no markup
