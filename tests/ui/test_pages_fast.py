"""Every page under AppTest on a tiny random Llama (the loader patched): renders, draws, and shows on arrival what a
first visit should (ARRIVAL: one opened page per test, its checks merged into that one run); replay and bad input."""

from __future__ import annotations

import pytest

from specviz import methods
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.core.trace import bundle_json, load_traces
from specviz.output.pages import ranges
from specviz.tuning.learning import curves, eagle_checkpoints, experiment_rows
from tests.apptest import APP, app_on, chart_specs, chart_title, titled

PAGES = [
    "views/home.py",
    "views/timeline.py",
    "views/medusa.py",
    "views/eagle.py",
    "views/lookahead.py",
    "views/acceptance.py",
    "views/compare.py",
    "views/data.py",
    "views/lineage.py",
]
PROMPT = "Name three rivers in Europe and one fact about each."


def problems(at) -> list[str]:
    return [str(e.value) for e in at.exception] + [e.value for e in at.error]


def home_explains_why_there_may_be_no_speedup(at) -> None:
    text = " ".join(m.value for m in at.markdown)
    assert "Why no speedup on my hardware?" in text and "CPU, fp32" in text and "CPU, bf16" in text
    names = [d.get("name", "") for d in titled(chart_specs(at), "Cost of one forward pass")["data"]]
    assert any(n.startswith("memory floor") for n in names)


def timeline_shows_the_finished_race(at) -> None:
    spec = titled(chart_specs(at), "race")
    assert sum(len(d.get("x", ())) for d in spec["data"]) > 0, "the race chart is empty on arrival"


def compare_opens_with_the_fastest_methods_on(at) -> None:
    on = {str(t.key).removeprefix("compare.on.") for t in at.toggle if str(t.key).startswith("compare.on.") and t.value}
    assert {"pld", "hybrid"} <= on and "sps" not in on, on
    depth, declared = at.number_input(key="cfg.eagle.depth"), ranges("eagle")["depth"]  # its settings expander's
    assert (depth.min, depth.max, depth.value) == (declared.low, declared.high, None), "the EAGLE page's, the fit's"


def data_draws_its_curves_tables_and_a_bar_per_head(at) -> None:
    titles = [chart_title(s) for s in chart_specs(at)]
    assert any("What data buys" in t for t in titles)
    assert {"The curves", "Recorded runs", "The corpus"} <= {s.value for s in at.subheader}
    # the app's test model has SmolLM2's widths, so every shipped EAGLE-2 head drafts on it: one bar each
    bars = next(s for s in chart_specs(at) if "head by head" in chart_title(s))
    assert len(bars["data"][0]["y"]) == len(eagle_checkpoints(curves(), experiment_rows()))
    assert min(bars["data"][0]["y"]) >= 1.0
    text = " ".join(m.value for m in at.markdown)  # the greedy-, sampled- and openings-answer runs, compared
    assert "Greedy or sampled?" in text and "Which positions?" in text


ARRIVAL = {
    "views/home.py": home_explains_why_there_may_be_no_speedup,
    "views/timeline.py": timeline_shows_the_finished_race,
    "views/compare.py": compare_opens_with_the_fastest_methods_on,
    "views/data.py": data_draws_its_curves_tables_and_a_bar_per_head,
}


@pytest.fixture
def declared(monkeypatch) -> list[str]:
    """The names of the figures the pages draw through their declarations (ui.declared.draw), as drawn."""
    import ui.declared

    drawn: list[str] = []
    real = ui.declared.draw

    def draw(page, name, *args, **kw):
        page.figure(name)  # KeyError: a figure the page does not declare
        drawn.append(name)
        return real(page, name, *args, **kw)

    monkeypatch.setattr(ui.declared, "draw", draw)
    return drawn


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_and_draws(tiny_app, declared, page):
    at = app_on(page, max_new_tokens=8)
    assert not problems(at), (page, problems(at))
    assert chart_specs(at), f"{page} draws no figure"
    # every chart on the page went through its page's declaration: one drawn outside it is one too many
    assert len(chart_specs(at)) == len(declared), (page, declared)
    assert any("tiny-random" in c.value for c in at.sidebar.caption)  # the patched model ran
    if page in ARRIVAL:
        ARRIVAL[page](at)


def test_home_decodes_and_draws_its_timeline(tiny_app):
    at = app_on("views/home.py", max_new_tokens=8)
    at.button(key="home.run").click().run()
    assert not problems(at)
    titles = [chart_title(s) for s in chart_specs(at)]
    assert any("Serial" in t for t in titles) and any("forward pass" in t for t in titles)


def test_bad_input_is_a_message_not_a_crash(tiny_app):
    at = app_on("views/home.py", prompt="   ")
    at.button(key="home.run").click().run()
    assert not at.exception and any("empty" in w.value for w in at.warning)


def tiny_kwargs(name: str, lm) -> dict:
    """The method's resources for a tiny model (its `tiny_resources` hook: untrained heads, a short draft)."""
    hook = getattr(methods.get(name), "tiny_resources", None)
    return hook(lm) if hook is not None else {}


@pytest.fixture(scope="module")
def bundle(tiny_lm) -> bytes:
    """Every method's trace on one prompt, saved the way the pages' save button saves them."""
    ids = prepare(tiny_lm, PROMPT)
    traces = [
        methods.get(name).generate(
            tiny_lm, ids, Sampling(max_new_tokens=10), prompt=PROMPT, **tiny_kwargs(name, tiny_lm)
        )
        for name in methods.available()
    ]
    data = bundle_json(traces)
    assert {t.method for t in load_traces(data)} == set(methods.available())
    return data.encode() if isinstance(data, str) else data


# one page in the fast tier (a method page: its step views from the replayed trace), every page in the full one
REPLAY = [pytest.param(p, marks=() if p == "views/medusa.py" else pytest.mark.full) for p in PAGES]


@pytest.mark.parametrize("page", REPLAY)
def test_bundle_replays_on_page(tiny_app, bundle, page):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.file_uploader(key="replay.files").set_value(("lecture.json", bundle, "application/json")).run()
    assert set(at.session_state["replay.traces"]) == set(methods.available())
    at.switch_page(page).run()
    assert not problems(at), (page, problems(at))
    if page != "views/home.py":
        assert chart_specs(at), f"{page} draws the replayed traces"


def test_bad_model_is_a_message():
    """The real loader (not patched): a model folder that does not exist is one clear error."""
    at = app_on("views/home.py", model="/no/such/model")
    assert not at.exception
    assert any("neither a folder" in e.value for e in at.error)


def test_corrupt_bundle_is_a_clear_message(tiny_app):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.file_uploader(key="replay.files").set_value(("broken.json", b'{"method": ', "application/json")).run()
    assert not at.exception
    assert any("broken.json" in e.value for e in at.error)
