"""The home page under AppTest decodes with the real model and draws its figures (the tiny-model checks of
every page, bad input included, are in test_pages_fast.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")

pytestmark = pytest.mark.real_model


def new_app(**state) -> AppTest:
    """A fresh app; sidebar values go in through session state (AppTest drops the sidebar on reruns)."""
    at = AppTest.from_file(APP, default_timeout=300)
    for key, value in state.items():
        at.session_state[f"sidebar.{key}"] = value
    at.run()
    return at


def test_home_decodes_and_draws(real_app):
    at = new_app(max_new_tokens=8)
    assert not at.exception
    at.button(key="home.run").click().run()
    assert not at.exception and not at.error
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = [s["layout"].get("title", {}).get("text", "") for s in specs]
    assert any("Serial" in t for t in titles) and any("forward pass" in t for t in titles)
    timeline = next(s for s in specs if "Serial" in s["layout"]["title"]["text"])
    forward_bars = [d for d in timeline["data"] if d.get("name") == "forward pass"]
    assert 1 <= len(forward_bars[0]["x"]) <= 8
