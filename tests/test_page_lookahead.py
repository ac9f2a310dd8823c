"""The Lookahead & Jacobi page under AppTest, on the real model with a few tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
pytestmark = pytest.mark.real_model


def chart_titles(at: AppTest) -> list[str]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s["layout"].get("title", {}).get("text", "") for s in specs]


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["sidebar.max_new_tokens"] = 12
    at.session_state["sidebar.prompt"] = "Repeat after me: one two three, one two three, one two three."
    at.run()
    at.switch_page("views/lookahead.py").run()
    return at


def test_page_draws_every_view_and_follows_the_sliders():
    at = open_page()
    assert not at.exception and not at.error
    titles = chart_titles(at)
    for want in ("running speedup", "Jacobi window", "Verification branch", "attention mask",
                 "n-gram pool", "Jacobi convergence", "wider window"):
        assert any(want in t for t in titles), (want, titles)
    mask = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "attention mask" in json.loads(c.proto.spec)["layout"]["title"]["text"])
    assert "root" in mask["layout"]["yaxis"]["ticktext"]
    at.slider(key="lookahead.step").set_value(1).run()
    assert not at.exception
    at.slider(key="lookahead.window").set_value(2).run()
    at.slider(key="lookahead.ngram").set_value(2).run()
    at.slider(key="lookahead.guesses").set_value(3).run()
    assert not at.exception and not at.error
    assert "1 + (N−1)·W + G·(N−1) = **6 tokens**" in " ".join(c.value for c in at.caption)
    at.slider(key="lookahead.jacobi_pass").set_value(0).run()
    assert not at.exception
