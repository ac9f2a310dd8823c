"""A live run on the shared model, as its visitor sees it: priced first and refused above the server's bound
(specviz.tuning.budget), its place in line said in words while it waits (specviz.tuning.turns), a Stop button while
it waits or runs, and ended between two steps when its visitor presses Stop, changes a setting or leaves.

The run executes in the visitor's script thread. A click on any widget asks Streamlit for a rerun, a closed tab for
a stop; Streamlit raises them at the script's next `st.` call, which a run on the model makes none of. So the run
asks (`Visitor`, the library's `stop`) between steps: Streamlit's own yield check (the one its cache waits call)
raising a rerun or a stop, or a session no longer connected, ends it with Stopped, and what Streamlit raised is
raised again once the run has let go of the model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from specviz.core.model import LoadedModel
from specviz.methods.base import Stopped
from specviz.tuning import budget, fit, probe, turns

T = TypeVar("T")
STOPPED = "live.stopped"  # the signature of the run this visitor stopped: it is not started again by itself
WORDS = "live.words"  # what the stopped run had done, in words
DONE: set[str] = set()  # runs computed in this process (their results sit in the page caches): they skip the line


class Visitor:
    """The running script's visitor, as the library's `stop`: True once they pressed Stop, changed a widget or
    left; what Streamlit raised to say so is kept for `resume`."""

    def __init__(self) -> None:
        ctx = get_script_run_ctx(suppress_warning=True)
        self._check = ctx.yield_check if ctx is not None else None  # raises a pending rerun or stop, else nothing
        self._session = ctx.session_id if ctx is not None else ""
        self.request: RerunException | StopException | None = None

    def __call__(self) -> bool:
        if self.request is None and self._check is not None:
            try:
                self._check()
            except (RerunException, StopException) as exc:
                self.request = exc
        return self.request is not None or not connected(self._session)

    def resume(self) -> None:
        """Raise again what Streamlit raised for this visitor (nothing if it raised nothing)."""
        if self.request is not None:
            raise self.request


def connected(session_id: str) -> bool:
    """Whether the session is still connected (True outside a server: a test, a bare script)."""
    if not session_id or not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(session_id)


def signature(*parts: object) -> str:
    """A short stable name for one run's settings (their reprs: frozen Configs, Sampling, strings)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def device_cost(lm: LoadedModel, names: list[str]) -> fit.DeviceCost:
    """What a step costs here: the fit's measurement where a fitted method runs (it needs it anyway), else the
    latency curve alone (plain decoding, prompt lookup, SpS, Jacobi never wait for the fit)."""
    if any(n in fit.PAPER for n in names):
        return fit.device_cost(lm)
    return budget.from_curve(probe.cached_curve(lm))


def price(lm: LoadedModel, configs: dict, tokens: int, prompt: int, runs: int = 1, warm: int = 0) -> budget.Price:
    """The run's price on `lm` (budget.price over this device's cost)."""
    return budget.price(device_cost(lm, list(configs)), configs, tokens, runs, warm, prompt)


def one_pass(lm: LoadedModel, sig: str, what: str, prompt: int, work: Callable[[], T]) -> T | None:
    """`work()` that runs the model over one context of `prompt` tokens (the lab, a re-grown tree): priced as that
    prefill, in line with the other visitors' runs and said so while it waits, stoppable until it starts."""
    return live(lm, sig, what, price(lm, {"ar": None}, 0, prompt), work)


def _mark(sig: str) -> None:
    st.session_state[STOPPED] = sig


def forget() -> None:
    """Let a stopped run start again (the Run again button; a page's own run button)."""
    st.session_state.pop(STOPPED, None)


def held_back(sig: str) -> bool:
    """Whether this visitor stopped this very run: then it says so, with a Run again button, and does not run."""
    if st.session_state.get(STOPPED) != sig:
        return False
    words = st.session_state.get(WORDS, "the run was stopped")
    st.info(f"Stopped: {words}. Nothing of it was kept; press **Run again** to run it with these settings.")
    st.button("Run again", key=f"live.again.{sig}", on_click=forget)
    return True


def live(
    lm: LoadedModel, sig: str, what: str, p: budget.Price | None, work: Callable[[], T], cached: bool = True
) -> T | None:
    """`work()` (a run on `lm`) in its turn, with a Stop button and its place in line shown while it waits; None,
    with one sentence on the page, when it is refused (over the bound), stopped, or was stopped before. A `cached`
    run this process has computed (its page cache answers it) skips the line; an uncached one always waits in it."""
    if held_back(sig):
        return None
    if p is not None and (why := budget.refusal(p)):
        st.warning(why)
        return None
    visitor, box = Visitor(), st.empty()
    with box.container():
        note = st.empty()
        st.button("Stop", key=f"live.stop.{sig}", on_click=_mark, args=(sig,), help="End this run after its step.")

    def say(words: str) -> None:
        if words:
            note.info(f"The model is busy: {words}; then {what} takes about {p_words(p)}.")
        else:
            note.empty()

    ask = turns.Request(what, p.seconds if p else 0.0, stop=visitor, on_wait=say, wait=not (cached and sig in DONE))
    try:
        with turns.turn(lm, ask):
            result = work()
    except Stopped as exc:
        st.session_state[WORDS] = str(exc)
        visitor.resume()  # the visitor's rerun or stop, as Streamlit would have raised it
        box.empty()
        st.info(f"Stopped: {exc}.")  # stopped by the caller's own `stop`: the page says so
        return None
    box.empty()
    DONE.add(sig)
    return result


def p_words(p: budget.Price | None) -> str:
    return turns.duration(p.seconds) if p is not None else "a moment"
