"""What data buys under AppTest: the curves, the recorded runs, the corpus, and A head by head where heads fit."""

from __future__ import annotations

from tests.apptest import app_on, chart_specs, chart_title


def test_the_data_page_follows_its_depth_control(tiny_app) -> None:
    """(What the page shows on arrival: tests/ui/test_pages_fast.py's ARRIVAL.)"""
    at = app_on("views/data.py", max_new_tokens=8)
    at.segmented_control(key="data.depth").set_value(3).run()
    assert not at.exception and any("depth 3" in str(s) for s in chart_specs(at))


def test_the_heads_picker_keeps_one_kind(tiny_app) -> None:
    at = app_on("views/data.py", max_new_tokens=8)
    at.pills(key="data.kinds").set_value(["draft"]).run()
    assert not at.exception and not at.error
    fig = next(s for s in chart_specs(at) if "What data buys" in chart_title(s))
    names = {d.get("name", "") for d in fig["data"] if d.get("name")}
    assert any("draft" in n for n in names)
    assert not any("EAGLE" in n or "Medusa" in n for n in names), names
