"""AppTest: the prompt preset selector, the method pages' presets, presentation mode and the deck button."""

from __future__ import annotations

import pytest

from specviz.core.prompts import preset_prompts, prompt_kinds
from specviz.tuning import presets
from tests.apptest import app_on, chart_specs, chart_title


def problems(at) -> list[str]:
    return [str(e.value) for e in at.exception] + [e.value for e in at.error]


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_prompt_preset_fills_the_prompt_and_says_which_methods_win(tiny_app):
    """On the home page: the selector is in the shared sidebar, and home decodes only on its button (the
    timeline page ran every method on each of the three changes)."""
    at = app_on("views/home.py", max_new_tokens=8)
    assert at.selectbox(key="sidebar.preset").value == "chat-sky"  # the default prompt is a shipped one
    item = next(p for p in preset_prompts() if p.category == "extraction")
    at.selectbox(key="sidebar.preset").set_value(item.id).run()
    assert not problems(at)
    assert at.text_area(key="sidebar.prompt").value == item.text
    assert any(prompt_kinds()["extraction"].hint in c.value for c in at.sidebar.caption)
    at.text_area(key="sidebar.prompt").set_value(item.text + " Answer briefly.").run()  # still editable
    assert at.selectbox(key="sidebar.preset").value == "own" and not problems(at)


# Medusa in the fast tier, the other two pages in the full one (each runs the page five times)
@pytest.mark.parametrize(
    "page, method",
    [
        ("views/medusa.py", "medusa"),
        pytest.param("views/eagle.py", "eagle", marks=pytest.mark.full),
        pytest.param("views/lookahead.py", "lookahead", marks=pytest.mark.full),
    ],
)
@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_presets_fill_the_sliders(tiny_app, page, method):
    at = app_on(page, max_new_tokens=8)
    assert at.radio(key=f"{method}.preset").value == presets.start(method).key
    first = {n: at.slider(key=f"{method}.{n}").value for n in presets.fields(method) if n != "tree"}
    at.radio(key=f"{method}.preset").set_value("paper").run()
    assert not problems(at), problems(at)
    paper = presets.values(method, presets.get(method, "paper"))
    for name, value in paper.items():
        widget = at.radio if name == "tree" else at.slider
        assert widget(key=f"{method}.{name}").value == value, name
    assert chart_specs(at)
    name, value = next((n, v) for n, v in paper.items() if n != "tree")
    at.slider(key=f"{method}.{name}").set_value(value - 1).run()  # off every preset: custom
    assert at.radio(key=f"{method}.preset").value == "custom" and not problems(at)
    at.radio(key=f"{method}.preset").set_value(presets.start(method).key).run()  # back where the page started
    assert at.slider(key=f"{method}.{name}").value == first[name]


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
@pytest.mark.full
def test_both_presets_are_measured_on_request(tiny_app):
    at = app_on("views/eagle.py", max_new_tokens=8)
    at.button(key="eagle.measure_presets").click().run()
    assert not problems(at)
    table = next(d for d in at.dataframe if "verified tokens per forward" in d.value.columns)
    assert list(table.value["preset"]) == [p.label for p in presets.presets("eagle")]
    fitted, paper = table.value["verified tokens per forward"]  # the shape fitted to this device, then the paper's
    assert 2 <= fitted <= 60 and paper == 60
    assert any("latency probe" in c.value for c in at.caption)


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_presentation_mode_folds_settings_and_steps_with_buttons(tiny_app):
    at = app_on("views/medusa.py", max_new_tokens=8)
    assert not [b for b in at.button if b.key == "present_next"]
    at.toggle(key="sidebar.present").set_value(True).run()
    assert not problems(at)
    assert any(e.label == "Settings" for e in at.sidebar.expander)  # the sidebar's knobs fold away
    assert any(e.label == "Settings" for e in at.main.expander)  # and the page's
    assert at.text_area(key="sidebar.prompt").value  # still there, with its value
    assert "medusa.step" in at.session_state, "a 6-token run on the tiny model takes several steps"
    slider = at.slider(key="medusa.step")
    start, last = slider.value, slider.max
    go, back, move = ("present_next", "present_prev", 1) if start < last else ("present_prev", "present_next", -1)
    at.button(key=go).click().run()
    assert at.slider(key="medusa.step").value == start + move and not problems(at)
    at.button(key=back).click().run()
    assert at.slider(key="medusa.step").value == start


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_every_page_offers_its_slide_deck(tiny_app):
    at = app_on("views/lookahead.py", max_new_tokens=8)
    button = next(b for b in at.get("download_button") if "Slide deck" in b.proto.label)
    assert f"{len(chart_specs(at))} slides" in button.proto.label


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
@pytest.mark.full
def test_compare_shows_where_each_method_wins(tiny_app):
    from specviz.output.viz.stored import category_bench

    if category_bench() is None:
        pytest.skip("no stored bench result with categories in this checkout")
    at = app_on("views/compare.py", max_new_tokens=8)
    assert not problems(at)
    fig = next(s for s in chart_specs(at) if "Where each method wins" in chart_title(s))
    assert "measured on" in chart_title(fig)
    assert fig["data"][0]["type"] == "heatmap"
