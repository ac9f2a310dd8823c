"""The timeline and comparison pages under AppTest, live and from a replayed trace bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
pytestmark = pytest.mark.real_model


def app_on(page: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in {"max_new_tokens": 12, **state}.items():
        at.session_state[f"sidebar.{key}"] = value
    at.run()
    at.switch_page(page).run()
    return at


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_timeline_page_races_lanes():
    at = app_on("views/timeline.py")
    assert not at.exception and not at.error
    race = chart_specs(at)[0]
    assert race.get("frames"), "the race figure animates"
    lanes = {y for d in race["frames"][-1]["data"] for y in d.get("y", [])}  # the last frame shows every lane
    assert any(lane.startswith("ar") for lane in lanes)
    at.slider(key="timeline.upto").set_value(10).run()
    assert not at.exception


def test_compare_page_live_rows():
    at = app_on("views/compare.py")
    assert not at.exception and not at.error
    specs = chart_specs(at)
    speedup = next(s for s in specs if "speedup over plain" in s["layout"].get("title", {}).get("text", ""))
    assert speedup["data"][0]["x"][0] == "ar" and abs(speedup["data"][0]["y"][0] - 1.0) < 1e-9
