"""The Lookahead & Jacobi page under AppTest, on the real model with a few tokens."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import app_on, chart_specs, chart_title

pytestmark = pytest.mark.real_model


def chart_titles(at: AppTest) -> list[str]:
    return [chart_title(s) for s in chart_specs(at)]


def open_page() -> AppTest:
    return app_on("views/lookahead.py", prompt="Repeat after me: one two three, one two three, one two three.")


def test_page_draws_every_view_and_follows_the_sliders(real_app):
    at = open_page()
    assert not at.exception and not at.error
    titles = chart_titles(at)
    for want in (
        "running speedup",
        "Jacobi window",
        "Verification branch",
        "attention mask",
        "n-gram pool",
        "Jacobi convergence",
        "wider window",
    ):
        assert any(want in t for t in titles), (want, titles)
    mask = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "attention mask" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    assert "root<br>p" in mask["layout"]["yaxis"]["ticktext"]  # each segment with its position ids
    at.slider(key="lookahead.step").set_value(1).run()
    assert not at.exception
    at.slider(key="lookahead.window").set_value(2).run()
    at.slider(key="lookahead.ngram").set_value(2).run()
    at.slider(key="lookahead.guesses").set_value(3).run()
    assert not at.exception and not at.error
    assert "1 + (N−1)·W + G·(N−1) = **6 tokens**" in " ".join(c.value for c in at.caption)
    at.slider(key="lookahead.jacobi_pass").set_value(0).run()
    assert not at.exception
