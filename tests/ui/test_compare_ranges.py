"""The Compare page's settings take the method pages' ranges (issue 63): each method's number inputs there had no
bounds but its Config's own checks (EAGLE depth 12, top-k 32, 256 nodes; Lookahead 32/8/32; Medusa and Hydra 129
nodes), so one visitor could hold the model for hours; and a field the device's fit chooses stays the fit's."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from specviz import methods
from specviz.output.pages import PAGES, ranges

NAMES = [n for n in methods.available() if n != "ar"]


def controls_script() -> None:
    import streamlit as st

    from ui.common import config_controls

    for name in st.session_state["names"]:
        st.session_state[f"result.{name}"] = repr(config_controls(name))


def opened() -> AppTest:
    at = AppTest.from_function(controls_script, default_timeout=60)
    at.session_state["names"] = NAMES
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_declared_range_is_the_compare_inputs_range():
    """Each Config field a method page's slider sets is bounded on Compare by that slider's declared range."""
    at = opened()
    bounded = set()
    for name in NAMES:
        for field, control in ranges(name).items():
            box = at.number_input(key=f"cfg.{name}.{field}")
            assert (box.min, box.max) == (control.low, control.high), (name, field, box.min, box.max)
            bounded.add((name, field))
    shapes = {(m, f) for m in ("eagle", "eagle3", "hybrid") for f in ("depth", "top_k", "total_tokens")}
    shapes |= {("lookahead", f) for f in ("window", "ngram", "guesses")} | {("medusa", "total_tokens")}
    assert shapes | {("hydra", "total_tokens"), ("jacobi", "guesses"), ("sps", "gamma")} <= bounded, bounded
    depth = next(c for c in PAGES["eagle"].controls if c.field == "depth")  # the EAGLE page's own slider
    assert ranges("eagle")["depth"] is ranges("hybrid")["depth"] is depth


def test_a_fitted_field_is_left_to_the_fit_until_a_visitor_sets_it():
    """A tree's or a window's shape (0, Lookahead's G -1: fitted where the run starts) starts empty and passes
    nothing: the Config keeps its unset value; a value the visitor sets within the range is passed as set."""
    at = opened()
    for name, field in [("eagle", "depth"), ("medusa", "total_tokens"), ("lookahead", "guesses"), ("sps", "gamma")]:
        assert at.number_input(key=f"cfg.{name}.{field}").value is None, (name, field)
    for name in NAMES:
        assert at.session_state[f"result.{name}"] == repr(methods.get(name).Config()), name
    at.number_input(key="cfg.eagle.depth").set_value(5).run()
    at.number_input(key="cfg.lookahead.guesses").set_value(0).run()
    assert not at.exception
    assert at.session_state["result.eagle"] == repr(methods.get("eagle").Config(depth=5))
    assert at.session_state["result.lookahead"] == repr(methods.get("lookahead").Config(guesses=0))
