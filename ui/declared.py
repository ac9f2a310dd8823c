"""A page as declared (specviz/output/pages/): its controls as widgets, its runs' Configs from their values, and
its figures drawn by their declared builders, so the page draws what the lesson and the deck draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from specviz.core.trace import Trace
from specviz.output.pages import Page, Shown
from ui.common import show_figure
from ui.lesson_pack import step_rule
from ui.memo import shared


def widget(
    where: Any, page: Page, key: str, label: str, choose: str = "radio", only: Sequence[Any] = (), **kw: Any
) -> Any:
    """The control `key` as its page declares it (range, options, kind), with its label and the widget's
    own extras (value, step, help…); `choose`: "radio", "selectbox" or "select_slider" for a choice, `only`:
    the declared options this machine can offer, in the order shown (a trained draft only where one is)."""
    c = page.settings[key]
    if c.kind in ("int", "float"):
        return where.slider(label, c.low, c.high, key=key, **kw)
    if c.kind == "bool":
        return where.toggle(label, key=key, **kw)
    options = [o for o in only if o in c.options] if only else list(c.options)
    if choose == "radio":
        return where.radio(label, options, key=key, horizontal=True, **kw)
    return getattr(where, choose)(label, options, key=key, **kw)


def values(page: Page, **now: Any) -> dict[str, Any]:
    """The page's widget values this run (`now`: values the page decided itself, by the key's last part)."""
    prefix = f"{page.id}."
    out = {k: v for k, v in st.session_state.items() if isinstance(k, str) and k.startswith(prefix)}
    return out | {prefix + k: v for k, v in now.items()}


def configs(page: Page, figure: str = "", shows: Sequence[str] = (), **now: Any) -> dict[str, Any]:
    """{method: Config} the page runs for `figure`, from its widget values, as the lesson runs it."""
    return page.configs(values(page, **now), figure, shows)[0]


def draw(
    page: Page, name: str, inputs: Mapping[str, Any], index: int | None = None, measured: str = "", **now: Any
) -> None:
    """Figure `name` by its declared builder from its inputs: the runs (Traces, lists of repeats) or the data it
    draws (a stored bench, a measured curve), at step `index` of the run (None: the step rule's); `measured`: where
    a stored figure was measured; `now`: values the page decided itself. A figure of runs is built once for every
    visitor given the same Trace objects (a replayed recording's); one of data read anew each run is built anew."""
    given = {k: v for k, v in inputs.items() if v is not None}
    plain = {k: v for k, v in given.items() if isinstance(v, (str, int, float))}  # kept by value in the key
    held = [v for k, vs in given.items() if k not in plain for v in (vs if isinstance(vs, list) else [vs])]
    shown = Shown(values(page, **now), step_rule(), index)
    if not all(isinstance(v, Trace) for v in held):  # data read anew each run: no other visitor gives it again
        show_figure(page.draw(name, given, shown), name, measured)
        return
    settings = tuple(sorted((k, repr(v)) for k, v in (shown.values | plain).items()))
    key = ("page", page.id, name, index, shown.step, tuple(given), settings)
    show_figure(shared(key, held, lambda: page.draw(name, given, shown)), name, measured)
