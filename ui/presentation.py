"""Presentation mode: controls not needed on stage fold away, type grows, and keys step the page's step slider."""

from __future__ import annotations

import streamlit as st

KEY = "sidebar.present"
NEXT, PREV = "present_next", "present_prev"  # button keys (no dots: the shortcut finds them by CSS class)
NEXT_KEYS, PREV_KEYS = ["pagedown", "arrowright"], ["pageup", "arrowleft"]  # a presenter's clicker sends PageDown

STYLE = """<style>
html { font-size: 20px; }
[data-testid="stMain"] h1 { font-size: 2.4rem; }
[data-testid="stMetricValue"] { font-size: 2.6rem; }
[data-testid="stCaptionContainer"] { font-size: 1rem; }
[data-testid="stToolbar"], [data-testid="stDecoration"] { display: none; }
</style>"""


def presenting() -> bool:
    return bool(st.session_state.get(KEY, False))


def toggle(container) -> bool:
    """The sidebar's switch; when on, the page's type is enlarged for a room."""
    on = container.toggle(
        "Presentation mode",
        False,
        key=KEY,
        help="Folds away the settings not needed on stage, enlarges type, and steps through the page's steps "
        "with PageDown / PageUp or the arrow keys (a presenter's clicker works).",
    )
    if on:
        st.markdown(STYLE, unsafe_allow_html=True)
    return on


def controls(label: str = "Settings"):
    """Where a page puts its knobs: the page itself, or a folded expander while presenting."""
    return st.expander(label, expanded=False) if presenting() else st.container()


def _step(key: str, count: int, delta: int) -> None:
    st.session_state[key] = max(0, min(count - 1, int(st.session_state.get(key, 0)) + delta))


def stepper(key: str, count: int) -> None:
    """While presenting: ◀ / ▶ buttons, bound to PageUp / PageDown and the arrows, for the step slider `key`.

    Call it before the slider is drawn: the buttons' callbacks set the slider's value for the next run.
    """
    if not presenting() or count <= 1:
        return
    from streamlit_shortcuts import add_shortcuts

    left, mid, right = st.columns([1, 4, 1])
    left.button("◀ Previous step", key=PREV, on_click=_step, args=(key, count, -1), width="stretch")
    right.button("Next step ▶", key=NEXT, on_click=_step, args=(key, count, 1), width="stretch")
    mid.caption("PageDown / → next step · PageUp / ← previous step")
    add_shortcuts(**{NEXT: NEXT_KEYS, PREV: PREV_KEYS})


def figure_font(fig, height: int | None = None):
    """A copy of the figure with type large enough for the back of a room (the figure itself is not changed):
    18 px, no text under 16, its title placed for `height` if it is shown at another than its own (theme.legible)."""
    from specviz.output.viz.theme import legible

    return legible(fig, height=height)
