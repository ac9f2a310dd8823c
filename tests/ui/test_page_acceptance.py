"""The acceptance-decisions page under AppTest, on the real model with a few tokens."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import app_on, chart_specs, chart_title

pytestmark = pytest.mark.real_model


def charts(at: AppTest) -> dict[str, dict]:
    return {chart_title(s): s for s in chart_specs(at)}


def open_page() -> AppTest:
    return app_on("views/acceptance.py", prompt="Name three colours of the rainbow.")


def test_page_shows_decisions_typical_regions_and_the_lab(real_app):
    at = open_page()
    assert not at.exception and not at.error
    got = charts(at)
    for want in ("the decision for every proposed token", "Typical acceptance", "Losslessness lab"):
        assert any(want in t for t in got), (want, list(got))
    lab = next(s for t, s in got.items() if "Losslessness lab" in t)
    titles = [a["text"] for a in lab["layout"]["annotations"]]
    assert len(titles) == 3 and all("TV = " in t for t in titles)
    decisions = next(s for t, s in got.items() if "the decision for every proposed token" in t)
    assert {"target p(x)", "draft q(x)", "draw u"} <= {d.get("name") for d in decisions["data"]}
    assert len(at.dataframe) >= 2


def test_gamma_starts_where_the_trained_drafts_sweep_was_fastest(real_app):
    from specviz.methods.sps import swept_gamma

    at = open_page()
    best = swept_gamma()
    assert best is not None, "models/draft/gamma_sweep.json is committed with the draft"
    assert at.selectbox(key="acceptance.draft").value == "trained"
    assert at.slider(key="acceptance.gamma").value == best


def test_page_follows_rule_and_sliders(real_app):
    at = open_page()
    at.selectbox(key="acceptance.rule").set_value("flawed").run()
    assert not at.exception and not at.error
    assert any("common mistake" in w.value for w in at.warning)
    at.slider(key="acceptance.temperature").set_value(0.0).run()
    assert not at.exception and not at.error
    assert any(m.value == "greedy match" for m in at.metric)
    at.slider(key="acceptance.eps").set_value(0.2).run()
    at.slider(key="acceptance.gamma").set_value(2).run()
    assert not at.exception and not at.error
    # 12 tokens at gamma 2 take several judged steps, so the step picker is there (AppTest raises if not)
    at.slider(key="acceptance.step").set_value(1).run()
    assert not at.exception and not at.error
