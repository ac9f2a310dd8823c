"""Frozen Configs reach Streamlit's cache as they are: st.cache_data hashes them by their fields (no JSON round
trip), equal Configs share one run, a changed field runs again, and the Config the method runs with is the one the
page built, prompt lookup's verify-cost curve filled in once where its runs start (tuning.compare.steered)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from specviz.methods import pld
from specviz.tuning import compare


def _script() -> None:
    import streamlit as st

    from specviz.core.sampling import Sampling
    from specviz.methods import jacobi, pld
    from ui import resources

    s = Sampling(max_new_tokens=4)
    resources.run("pld", pld.Config(), "Hello there", s, "default")
    resources.run("pld", pld.Config(), "Hello there", Sampling(max_new_tokens=4), "default")  # equal
    resources.run("pld", pld.Config(max_draft=3), "Hello there", s, "default")  # one field changed
    two = {"pld": pld.Config(), "jacobi": jacobi.Config(guesses=3)}
    resources.paired(two, "Hello there", s, "default", 1)
    resources.paired({"pld": pld.Config(), "jacobi": jacobi.Config(guesses=3)}, "Hello there", s, "default", 1)
    resources.paired({"pld": pld.Config(), "jacobi": jacobi.Config(guesses=4)}, "Hello there", s, "default", 1)
    st.write("done")


def test_frozen_configs_are_cache_keys_and_reach_the_method_as_built(fresh_app, monkeypatch):
    seen: list[tuple[str, object]] = []
    real = compare.run_once

    def spy(lm, name, ids, sampling, config=None, prompt="", on_step=None):
        seen.append((name, config))
        return real(lm, name, ids, sampling, config, prompt=prompt, on_step=on_step)

    monkeypatch.setattr(compare, "run_once", spy)
    at = AppTest.from_function(_script, default_timeout=600).run()
    assert not at.exception, at.exception
    singles = [c for n, c in seen[:2]]  # the first two calls: the default Config, then max_draft 3 (equal one cached)
    assert [n for n, _ in seen[:2]] == ["pld", "pld"] and [c.max_draft for c in singles] == [10, 3]
    assert all(isinstance(c, pld.Config) and c.latency is not None for c in singles)  # prepared once
    paired = seen[2:]
    guesses = [c.guesses for n, c in paired if n == "jacobi"]
    # a paired call runs each method twice (a warm-up, then one repeat): two distinct keys, so two calls' worth
    assert guesses == [3, 3, 4, 4], guesses
