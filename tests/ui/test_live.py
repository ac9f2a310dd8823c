"""A live run in the app (ui.live): the visitor's Stop, a changed widget or a closed tab ends the run between two steps
and hands Streamlit its rerun or stop; a stopped run is not started again by itself but says so, with Run again; a run
over the bound is refused in words; the Stop button is there while it waits or runs, and gone after."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests, ScriptRequestType
from streamlit.testing.v1 import AppTest

from specviz import methods
from specviz.core.sampling import Sampling
from specviz.methods.base import Stopped
from ui import live

IDS = [1, 9906, 1528, 253, 2374, 30, 1345]


def visitor_with(monkeypatch, requests: ScriptRequests, active: bool = True) -> live.Visitor:
    """A Visitor of a script whose requests are `requests` (Streamlit's own class), its yield check the one
    Streamlit's ScriptRunner gives a run (a pending rerun or stop raised)."""

    def check() -> None:
        got = requests.on_scriptrunner_yield()
        if got is not None:
            raise RerunException(got.rerun_data) if got.type is ScriptRequestType.RERUN else StopException()

    ctx = SimpleNamespace(yield_check=check, session_id="s1")
    monkeypatch.setattr(live, "get_script_run_ctx", lambda suppress_warning=False: ctx)
    monkeypatch.setattr(live, "connected", lambda _sid: active)
    return live.Visitor()


def test_a_widget_clicked_mid_run_stops_it_after_the_step_and_streamlit_reruns(tiny_lm, monkeypatch):
    requests = ScriptRequests()
    visitor, steps = visitor_with(monkeypatch, requests), []

    def on_step(step) -> None:  # the visitor presses Stop while step 1 runs
        steps.append(step)
        requests.request_rerun(RerunData(query_string=""))

    with pytest.raises(Stopped):
        methods.get("ar").generate(tiny_lm, IDS, Sampling(max_new_tokens=24), on_step=on_step, stop=visitor)
    assert len(steps) == 1
    with pytest.raises(RerunException):
        visitor.resume()


def test_a_closed_tab_stops_the_run(monkeypatch):
    requests = ScriptRequests()
    visitor = visitor_with(monkeypatch, requests)
    assert visitor() is False
    requests.request_stop()  # what Streamlit does when the visitor's websocket closes
    assert visitor() is True
    with pytest.raises(StopException):
        visitor.resume()
    assert visitor_with(monkeypatch, ScriptRequests(), active=False)() is True  # a session gone, whatever the requests


LM = SimpleNamespace(lock=threading.Lock())  # the model the scripts below run on: only its line of jobs is used
HEARD: list[str] = []  # what a waiting run was told


def _script() -> None:
    import streamlit as st

    from specviz.methods.base import Stopped
    from tests.ui.test_live import HEARD, LM
    from ui import live

    def work() -> str:
        st.session_state["test.stop_shown"] = "live.stop.sig1" in st.session_state  # the Stop button, while it runs
        if st.session_state.get("test.stop_now"):
            raise Stopped("ar stopped after 3 of 12 tokens", 3)
        return "finished"

    real = live.turns.Request
    live.turns.Request = lambda *a, **kw: real(*a, **{**kw, "on_wait": lambda w: (HEARD.append(w), kw["on_wait"](w))})
    try:
        got = live.live(LM, "sig1", "a test run", st.session_state.get("test.price"), work)
    finally:
        live.turns.Request = real
    st.write(f"result: {got}")


def test_the_stop_control():
    at = AppTest.from_function(_script, default_timeout=60).run()
    assert not at.exception, at.exception
    assert "result: finished" in [m.value for m in at.markdown]
    assert at.session_state["test.stop_shown"]  # a Stop button while it ran
    assert not [b for b in at.button if b.label == "Stop"]  # and none once it is over
    at.session_state["test.stop_now"] = True  # the run stops (its `stop` said so)
    at.run()
    assert any("Stopped: ar stopped after 3 of 12 tokens" in m.value for m in at.info), [m.value for m in at.info]
    assert "result: None" in [m.value for m in at.markdown]
    at.session_state["test.stop_now"] = False
    at.session_state[live.STOPPED] = "sig1"  # what the Stop button's click leaves for the rerun
    at.run()
    assert any(m.value.startswith("Stopped: ar stopped after 3 of 12 tokens. Nothing of it was kept") for m in at.info)
    assert "result: None" in [m.value for m in at.markdown]  # a stopped run is not started again by itself
    at.button(key="live.again.sig1").click().run()
    assert "result: finished" in [m.value for m in at.markdown]


def test_a_run_over_the_bound_is_refused_on_the_page(monkeypatch):
    from specviz.tuning import budget

    monkeypatch.delenv(budget.ENV, raising=False)
    at = AppTest.from_function(_script, default_timeout=60)
    at.session_state["test.price"] = budget.Price(200.0, (budget.StepPrice("ar", 1.0, 30.0, 1, True),), 512, 3)
    at.run()
    assert not at.exception, at.exception
    assert any(w.value.startswith("This run would take about 3 min 20 s") for w in at.warning)
    assert "result: None" in [m.value for m in at.markdown]


def test_a_run_behind_another_says_where_it_stands_then_runs():
    from specviz.tuning import budget, turns

    held = threading.Event()
    HEARD.clear()

    def ahead() -> None:
        with turns.turn(LM, turns.Request("a job ahead", predicted_s=40.0)):  # type: ignore[arg-type]
            held.set()
            deadline = time.monotonic() + 60
            while not HEARD and time.monotonic() < deadline:  # until the run behind has been told where it stands
                time.sleep(0.05)

    t = threading.Thread(target=ahead)
    t.start()
    assert held.wait(10)
    live.DONE.discard("sig1")  # a run this process has computed rides past the line (its result is cached)
    at = AppTest.from_function(_script, default_timeout=90)
    at.session_state["test.price"] = budget.Price(20.0, (budget.StepPrice("ar", 1.0, 30.0, 1, True),), 12, 1)
    at.run()
    t.join(10)
    assert not at.exception, at.exception
    assert HEARD and HEARD[0] == "waiting for one run, about 40 s" and HEARD[-1] == "", HEARD
    assert "result: finished" in [m.value for m in at.markdown]


def test_an_uncached_run_waits_in_line_even_after_the_same_run_was_computed(monkeypatch):
    """The home page's Decode is no cached run: computed before or not, it waits its turn (and says so); a cached
    run computed before skips the line (its page cache answers it without the model)."""
    from contextlib import contextmanager

    from ui import live

    waits = []

    @contextmanager
    def turn(_lm, ask):
        waits.append(ask.wait)
        yield None

    monkeypatch.setattr(live.turns, "turn", turn)
    monkeypatch.setattr(live, "held_back", lambda _sig: False)
    live.DONE.add("computed-before")
    assert live.live(None, "computed-before", "plain decoding", None, lambda: 1, cached=False) == 1
    assert live.live(None, "computed-before", "a cached run", None, lambda: 2) == 2
    assert waits == [True, False]
