"""The sidebar's prompt presets: the prompts shipped with the app, by kind, each kind with its hint (still editable)."""

from __future__ import annotations

from functools import cache

import streamlit as st

from specviz.core.prompts import Kind, PromptError, PromptItem, preset_prompts, prompt_kinds

KEY, PROMPT_KEY = "sidebar.preset", "sidebar.prompt"
OWN = "own"  # the option for a prompt the user typed


@cache
def _presets() -> tuple[dict[str, PromptItem], dict[str, Kind]]:
    return {p.id: p for p in preset_prompts()}, prompt_kinds()


def _label(pid: str) -> str:
    if pid == OWN:
        return "Your own prompt"
    items, kinds = _presets()
    p = items[pid]
    return f"{kinds[p.category].label if p.category in kinds else p.category} · {p.title or p.id}"


def _fill() -> None:
    pid = st.session_state.get(KEY, OWN)
    items, _ = _presets()
    if pid in items:
        st.session_state[PROMPT_KEY] = items[pid].text


def picker(container, default_text: str) -> PromptItem | None:
    """A preset selector that fills the prompt box (call it before the box); returns the chosen preset, if any.

    The selector follows the box: once the text is edited away from the preset, it reads "Your own prompt".
    """
    try:
        items, kinds = _presets()
    except PromptError as exc:
        container.warning(str(exc))
        return None
    text = st.session_state.setdefault(PROMPT_KEY, default_text)
    st.session_state[KEY] = next((pid for pid, p in items.items() if p.text == text), OWN)
    pid = container.selectbox(
        "Prompt preset",
        [OWN, *items],
        format_func=_label,
        key=KEY,
        on_change=_fill,
        help="Prompts shipped with the app, by kind: each kind favours different methods. Pick one, then edit "
        "it freely. They are for demonstration and evaluation; no head was trained on them.",
    )
    chosen = items.get(pid)
    if chosen is not None and chosen.category in kinds:
        container.caption(f"**{kinds[chosen.category].label}:** {kinds[chosen.category].hint}")
    return chosen
