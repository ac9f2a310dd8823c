"""The timeline and comparison pages under AppTest, live and from a replayed trace bundle."""

from __future__ import annotations

import pytest

from tests.apptest import app_on, chart_specs

pytestmark = pytest.mark.real_model


def test_timeline_page_races_lanes(real_app):
    at = app_on("views/timeline.py")
    assert not at.exception and not at.error
    race = chart_specs(at)[0]
    assert race.get("frames"), "the race figure animates"
    lanes = {y for d in race["frames"][-1]["data"] for y in d.get("y", [])}  # the last frame shows every lane
    assert any(lane.startswith("ar") for lane in lanes)
    at.slider(key="timeline.upto").set_value(10).run()
    assert not at.exception


def test_compare_page_live_rows(real_app):
    at = app_on("views/compare.py")
    assert not at.exception and not at.error
    specs = chart_specs(at)
    speedup = next(s for s in specs if "speedup over plain" in s["layout"].get("title", {}).get("text", ""))
    assert speedup["data"][0]["x"][0] == "ar" and abs(speedup["data"][0]["y"][0] - 1.0) < 1e-9
