"""The lesson in the app: each stop's narration, figure in focus and live numbers above its page; ◀ / ▶, PageUp /
PageDown and a presenter's clicker (or the arrow keys) move through the stops, and the page navigates itself.

The stops are data (specviz/output/lesson/model.py reads them). app.py calls route() before the sidebar, controls() in
it, banner() before the page runs and focus() after it: the figure in focus is one the page drew (ui.deck notes
every figure a page draws), shown again at the top of the page with the numbers of the runs behind it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from specviz.core.measure import provenance
from specviz.core.trace import Trace
from specviz.output.lesson.deck import numbers, told_live
from specviz.output.lesson.formulas import display_math
from specviz.output.lesson.model import ENV, PAGES, Lesson, LessonError, Stop, lesson_path
from specviz.output.lesson.names import relabel
from specviz.output.lesson.visitor import escaped, lesson_file
from ui import deck, lesson_frame, lesson_index, lesson_pack, presentation, resources
from ui.lesson_frame import WIDE

ON, AT, FILE, GOTO, STARTED = "lesson.on", "lesson.at", "lesson.file", "lesson.goto", "lesson.started"
VALUES, CARRY = "lesson.values", "lesson.carry"  # the stop's settings; what a page switch must carry over
NEXT, PREV = "lesson_next", "lesson_prev"  # button keys: no dots, the key handler finds them by CSS class
# px: a figure keeps its own height inside these, so a stop fits a 1600 × 900 screen (its body starts 268 px down,
# ui.lesson_frame; a recorded stop's figure gives up more where its numbers need the room)
FIGURE_HEIGHT = (420, 620)
UNDER_NARRATION = 180  # px less for a wide figure: its narration (up to five lines) sits above it, not beside


# what banner() leaves for focus(): the lesson, the stop at its build, the column for its numbers, the figure's
# place, whether it replays the recording, and the narration's place (a live stop's is told again after its runs)
Slot = tuple[Lesson, Stop, Any, Any, bool, Any]


def tallest(figure: str) -> int:
    """The most height the stop's figure gets in the banner, so it ends above a 1600 × 900 screen's fold."""
    return FIGURE_HEIGHT[1] - (UNDER_NARRATION if figure in WIDE else 0)


# the lesson is laid out for 1600 × 900; a shorter window (a 1280 × 720 projector) is told how to fit it: the
# browser's zoom lays the page out as on the larger screen, where no CSS can (a zoomed plot misplaces its hover)
STYLE = """<style>
[data-testid="stMainBlockContainer"] { padding: 2rem 2.5rem 4rem 2.5rem; }
.st-key-lesson_banner [data-testid="stMarkdownContainer"] p { font-size: 1.08rem; line-height: 1.45; }
.specviz-short { display: none; }
@media (max-height: 860px) { .specviz-short { display: block; color: #64748b; font-size: 0.95rem; } }
</style>
<div class="specviz-short">This window is shorter than the 900 px the lesson is laid out for: zoom the browser out
(Ctrl − to 80% on a 1280 × 720 screen) and each stop fits, its figure above the fold.</div>"""
# PageDown / PageUp (what a presenter's clicker sends) and the arrow keys click ▶ / ◀; the arrows are left to a
# focused slider or text box. Installed once on the app's window; a rerun replaces it.
KEYS_JS = """<script>
const P = window.parent;
const body = `
  const t = e.target || {}; const tag = (t.tagName || '').toLowerCase();
  if (tag === 'input' || tag === 'textarea' || tag === 'select' || t.isContentEditable) return;
  const slider = t.getAttribute && t.getAttribute('role') === 'slider';
  let key = null;
  if (e.key === 'PageDown' || (e.key === 'ArrowRight' && !slider)) key = 'NEXT_KEY';
  if (e.key === 'PageUp' || (e.key === 'ArrowLeft' && !slider)) key = 'PREV_KEY';
  if (!key || e.ctrlKey || e.altKey || e.metaKey) return;
  const button = document.querySelector('.st-key-' + key + ' button');
  if (!button) return;
  e.preventDefault(); e.stopImmediatePropagation();
  if (!button.disabled) button.click();`;
if (P.__specvizLessonKeys) P.removeEventListener('keydown', P.__specvizLessonKeys, true);
P.__specvizLessonKeys = new P.Function('e', body);
P.addEventListener('keydown', P.__specvizLessonKeys, true);
</script>""".replace("NEXT_KEY", NEXT).replace("PREV_KEY", PREV)


def current() -> Lesson | None:
    """The lesson of the sidebar's file (re-read when it changes); None, with the reason on the page, if unusable."""
    typed = str(st.session_state.get(FILE) or "")
    try:  # a visitor's text only names a shipped lesson: it never reaches the filesystem elsewhere
        path = str(lesson_file(typed)) if typed.strip() else str(lesson_path(None))
    except ValueError as exc:
        st.error(f"The lesson cannot run: {exc}")  # the typed text is escaped in the sentence
        return None
    try:
        stamp = Path(path).stat().st_mtime if Path(path).is_file() else 0.0
        return resources.lesson(path, stamp)
    except LessonError as exc:
        st.error(f"The lesson cannot run: {exc}")
    return None


def _enter(lesson: Lesson, i: int, build: int = 0) -> None:
    """Go to stop `i` (at its build `build`): the page's settings as the stop has them (the rest at their
    defaults), its prompt, its page."""
    stop = lesson.stops[i]
    st.session_state[lesson_index.BUILD] = build
    ss = st.session_state
    for other in lesson.stops:  # forget what earlier stops set on this page, so each stop starts the same
        if other.page == stop.page:
            for key in other.widget_values():
                ss.pop(key, None)
    values = lesson.values(stop)
    for key, value in values.items():
        ss[key] = value
    ss[AT], ss[GOTO], ss[VALUES], ss[lesson_pack.LIVE] = i, stop.file, values, ""
    ss[lesson_pack.RULE] = stop.step


def _move(delta: int) -> None:
    lesson = current()
    if lesson is not None:
        at = max(0, min(len(lesson.stops) - 1, int(st.session_state.get(AT, 0))))
        _enter(lesson, *lesson_index.step(lesson, at, delta))  # through the stop's builds and questions, then on


def _switched() -> None:
    """The sidebar's Lesson switch: turning it on starts at the stop where it was left (the first, at first), in
    presentation mode (a slide's type)."""
    if st.session_state.get(ON) and (lesson := current()) is not None:
        st.session_state[presentation.KEY] = True
        _enter(lesson, min(int(st.session_state.get(AT, 0)), len(lesson.stops) - 1))


def route(pages: dict[str, Any], nav: Any) -> None:
    """Before the sidebar: start the lesson when the address asks for it (?lesson, or ?lesson=<stop id>), and go
    to the page of the stop just chosen. `pages`: file -> st.Page, as app.py registered them."""
    ss = st.session_state
    for key, value in ss.pop(CARRY, {}).items():  # before any widget of this run is drawn
        ss[key] = value
    named = st.query_params.get("pack")  # ?pack (the shipped recording) or ?pack=<name>: docs/lesson/<name>.json
    wanted = st.query_params.get("lesson", None if named is None else "")
    if wanted is not None and not ss.get(STARTED):
        ss[STARTED] = True
        if (lesson := current()) is not None:
            try:
                start = lesson.index(wanted) if wanted not in ("", "1", "on") else 0
            except LessonError as exc:  # names the visitor's ?lesson= text: shown escaped, never as markdown
                st.warning(escaped(str(exc)))
                start = 0
            ss[ON], ss[presentation.KEY] = True, True
            if named is not None:
                lesson_pack.open_named(named, lesson)
            _enter(lesson, start)
    if ss.get(ON):  # slides: the sidebar folded away (its arrow brings it back), the stop's recorded runs
        st.set_page_config(initial_sidebar_state="collapsed")
        lesson = current()
        at = lesson.stops[min(int(ss.get(AT, 0)), len(lesson.stops) - 1)] if lesson is not None else None
        try:  # before the sidebar: whatever a visitor's recording raises must leave its switch drawn
            lesson_pack.route(lesson, at)
        except lesson_pack.PACK_ERRORS as exc:
            lesson_pack.refused(st, exc)
    else:
        ss.pop(resources.PACK, None)
        ss.pop(lesson_pack.RULE, None)
    goto, values = ss.pop(GOTO, None), ss.pop(VALUES, {})
    if goto in pages and pages[goto].url_path != nav.url_path:
        # st.switch_page drops every widget's value (its rerun carries none): keep the sidebar's and the stop's
        ss[CARRY] = {
            k: ss[k] for k in list(ss) if str(k).startswith("sidebar.") or k in (ON, FILE, lesson_pack.PAGE_BELOW)
        } | values
        st.switch_page(pages[goto])


def controls(sb) -> None:
    """The sidebar's Lesson switch and the lesson file it reads (the shipped one, $SPECVIZ_LESSON's, or another)."""
    sb.toggle(
        "Lesson",
        False,
        key=ON,
        on_change=_switched,
        help="A guided path through the pages, one figure in focus at each stop: ◀ / ▶, PageDown / PageUp, "
        "the arrow keys or a presenter's clicker move through it. Open the app at ?lesson to start on it.",
    )
    if st.session_state.get(ON):
        st.session_state.setdefault(FILE, "")  # never the server's own path on screen
        sb.text_input(
            "Lesson file",
            key=FILE,
            max_chars=400,
            placeholder="this server's lesson" if os.environ.get(ENV) else "the shipped lesson",
            help="A TOML file of stops (copy specviz/output/lesson/lesson.toml, edit it); empty for the shipped one.",
        )
        lesson_pack.controls(sb, current)


def _deck(lm: Any, lesson: Lesson) -> bytes:
    """The lesson's deck (run when the button is pressed, outside the script: it reads no session state)."""
    from specviz.output.deck import deck_bytes
    from specviz.output.lesson.deck import lesson_slides

    return deck_bytes(lesson_slides(lm, lesson))


def deck_control(lesson: Lesson) -> None:
    """The sidebar's button for the lesson as slides: from the recording when one is replayed (no model), else
    every stop's figure drawn from runs made when it is pressed."""
    if lesson_pack.deck_button(lesson):
        return
    lm = None if resources.replaying() else resources.get_model()
    if lm is None:
        return
    st.sidebar.download_button(
        f"Slide deck of the lesson ({len(lesson.stops)} slides, .pptx)",
        lambda: _deck(lm, lesson),
        file_name="specviz_lesson.pptx",
        mime="application/vnd.openxmlformats-officedocument.presentationml.presentation",
        key="lesson.deck",
        on_click="ignore",
        help="Runs every stop's methods on its prompt and settings (a few minutes on a CPU) and writes one slide "
        "per stop: its figure at 1600 × 900, its narration, and the provenance and settings in the notes. "
        "The same as `python -m specviz export --lesson deck.pptx`.",
    )


def banner(pages: dict[str, Any], nav: Any) -> Slot | None:
    """Before the page runs: the stop's header, ◀ / ▶ and narration (or, on a method stop's last click, its four
    questions answered); returns where its numbers and figure go. `pages`: file -> st.Page, as for route()."""
    if not st.session_state.get(ON) or (lesson := current()) is None:
        return None
    i = min(int(st.session_state.get(AT, 0)), len(lesson.stops) - 1)
    whole = lesson.stops[i]
    b = min(lesson_index.build(), whole.clicks - 1)
    stop, asking = whole.at(min(b, whole.frames - 1)), b >= whole.frames
    deck_control(lesson)
    st.markdown(STYLE, unsafe_allow_html=True)
    box = st.container(border=True, key="lesson_banner")
    lesson_index.header(box, lesson, (i, b), _enter, _move)
    with box:
        st.html(KEYS_JS, unsafe_allow_javascript=True)
    try:
        replay = lesson_pack.banner(box, lesson, stop)
    except lesson_pack.PACK_ERRORS as exc:  # a visitor's recording: one sentence, the sidebar still drawn
        lesson_pack.refused(box, exc)
        replay = False
    if stop.file not in pages or pages[stop.file].url_path != nav.url_path:
        box.info(f"This stop is on the {PAGES[stop.page].title} page.")
        box.button("Go to this stop", key="lesson.return", on_click=_enter, args=(lesson, i))
        return None
    said = _told(lesson, whole, replay)
    if asking:  # the four questions answered, the measured lines from the recording when one is replayed
        try:
            answered = lesson_index.answers_of(lesson, stop, lesson_pack.current(lesson) if replay else None)
        except lesson_pack.PACK_ERRORS:
            answered = lesson_index.answers_of(lesson, stop, None)
        said = lesson_index.asked(answered)
    if stop.figure in WIDE:  # side by side, its panels' titles would run into each other
        told = box.empty()
        told.markdown(said)
        place = box.empty()  # the figure straight under the narration, its numbers beneath it
        return lesson, stop, box.container(), place, replay, told
    left, right = box.columns([2, 5] if not asking else [5, 7])
    told = left.empty()  # a live stop's narration, told again once its runs are made (focus)
    told.markdown(said)
    return lesson, stop, left.container(), right.empty(), replay, told


def _told(lesson: Lesson, stop: Stop, replay: bool) -> str:
    """The stop's narration told from the recording it replays (its numbers and chosen sentences, as the frame
    plans it: ui.lesson_frame.said), or before a live stop's runs are made, its numbers as … (focus tells it again
    from the runs)."""
    from specviz.output.lesson import told

    pack = lesson_pack.current(lesson) if replay else None
    try:
        if pack is not None:
            return lesson_frame.said(pack, lesson, stop, False)
    except lesson_pack.PACK_ERRORS:
        pass
    return display_math(told.skeleton(stop.spoken))


def page_runs(slot: Slot | None) -> bool:
    """Whether the page runs under the banner: always off a recorded stop (the lesson off, a live stop, a stop of
    another page); under a recorded stop only with its *Its page below* switch on (ui.lesson_pack.PAGE_BELOW)."""
    return slot is None or not slot[4] or bool(st.session_state.get(lesson_pack.PAGE_BELOW))


def _noted(name: str) -> tuple[go.Figure, str] | None:
    """The last figure called `name` the page drew in this run, with where a stored one was measured."""
    found = [f for f in st.session_state.get(deck.FIGURES, []) if f[0] == name]
    return (found[-1][1], found[-1][2] if len(found[-1]) > 2 else "") if found else None


def _drawn_here(stop: Stop) -> tuple[go.Figure, str] | None:
    """A figure only the lesson draws (the residual, the KV cache, the cost model…), from the runs the page made."""
    from specviz.output.lesson.pages import figure_of

    declared = figure_of(stop.page, stop.figure)
    if not declared.lesson_only:
        return None
    try:
        if declared.source == "computed" and stop.figure != "gpu_whatif":
            from specviz.output.lesson.formulas import computed

            fig, _fns, measured = computed(stop.figure, {})
            return fig, measured
        from specviz.output.lesson.figures import from_traces

        return from_traces(stop, dict(st.session_state.get(deck.TRACES, {}))), ""
    except (LessonError, KeyError, IndexError, OSError, ValueError):
        return None


def focus(slot: Slot | None) -> None:
    """After the page ran: its figure in focus at the top, the stop's numbers and where they were measured (from
    the recording when the stop replays one, else from the runs the page just made)."""
    if slot is None:
        return
    lesson, stop, side, place, replay, told = slot
    if replay:
        lesson_pack.focus(lesson, stop, side, place, tallest(stop.figure))
        lesson_index.alpha_control(side, stop)
        return
    found = _noted(stop.figure) or _drawn_here(stop)
    lesson_index.alpha_control(side, stop)
    if found is None:
        place.warning(f"The page drew no figure {stop.figure!r} this time; see the page below.")
        return
    fig, measured = found
    # a tree is as tall as its leaves need (so labels never overlap): a stop's settings keep it within the screen
    own = fig.to_dict()["layout"].get("height") or 450
    height = min(max(int(own), FIGURE_HEIGHT[0]), tallest(stop.figure))
    shown = relabel(presentation.figure_font(fig, height) if presentation.presenting() else go.Figure(fig))
    place.plotly_chart(shown.update_layout(height=height), key="lesson.figure", config={"displaylogo": False})
    traces: dict[str, Trace] = dict(st.session_state.get(deck.TRACES, {}))
    _tell_live(lesson, stop, traces, told)
    lines = numbers(stop, traces)
    if lines:
        side.markdown("  \n".join(lines))
    first = next(iter(traces.values()), None)
    if measured:
        where = f"From a stored measurement, {measured}."
    elif first is not None and resources.replaying():  # a visitor's saved traces: not measured here, nor now
        where = "From saved traces (a trace does not record where or when it was measured)."
    elif first is not None:
        stamp = provenance(first.device)
        where = f"{first.device}, {stamp.describe(stamp)} (commit {stamp.commit})."  # flags a loaded machine
    else:
        where = ""
    own = ", this stop's own" if stop.prompt != lesson.prompt else ""
    side.caption(f"{where} Prompt: {lesson.prompt_label(stop)} (shipped{own}).")


def _tell_live(lesson: Lesson, stop: Stop, traces: dict[str, Trace], place: Any) -> None:
    """A live stop's narration told again from the runs its page just made (numbers a range needs stay —)."""
    whole = lesson.stops[lesson.index(stop.id)]
    if whole.spoken and lesson_index.build() < whole.frames:
        place.markdown(display_math(told_live(whole, traces).text))
