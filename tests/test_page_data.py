"""What data buys under AppTest: the curves, the recorded runs, the corpus, and A head by head where heads fit."""

from __future__ import annotations

from specviz.tuning.learning import curves, eagle_checkpoints, experiment_rows
from tests.apptest import app_on, chart_specs, chart_title


def test_the_data_page_draws_its_curves_and_tables(tiny_app) -> None:
    at = app_on("views/data.py", max_new_tokens=6)
    assert not at.exception and not at.error
    titles = [chart_title(s) for s in chart_specs(at)]
    assert any("What data buys" in t for t in titles)
    assert [s.value for s in at.subheader][-3:] == ["The curves", "Recorded runs", "The corpus"]
    # the app's test model has SmolLM2's widths, so every shipped EAGLE-2 head drafts on it: one bar each
    bars = next(s for s in chart_specs(at) if "head by head" in chart_title(s))
    assert (
        len(bars["data"][0]["y"]) == len(eagle_checkpoints(curves(), experiment_rows())) >= 3
        and min(bars["data"][0]["y"]) >= 1.0
    )
    at.segmented_control(key="data.depth").set_value(3).run()
    assert not at.exception and any("depth 3" in str(s) for s in chart_specs(at))


def test_the_heads_picker_keeps_one_kind_and_the_page_compares_greedy_and_sampled_answers(tiny_app) -> None:
    at = app_on("views/data.py", max_new_tokens=6)
    assert any("Greedy or sampled?" in m.value for m in at.markdown)  # the greedy- and sampled-answer runs are kept
    # the openings-only run, compared at about as many positions with the greedy and sampled ones
    which = next(m.value for m in at.markdown if "Which positions?" in m.value)
    assert "on all its greedy answers" in which and "on all its sampled answers" in which
    at.pills(key="data.kinds").set_value(["draft"]).run()
    assert not at.exception and not at.error
    fig = next(s for s in chart_specs(at) if "What data buys" in chart_title(s))
    names = {d.get("name", "") for d in fig["data"] if d.get("name")}
    assert any("draft" in n for n in names)
    assert not any("EAGLE" in n or "Medusa" in n for n in names), names
