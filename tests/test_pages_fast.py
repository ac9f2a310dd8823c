"""Every page under AppTest on a tiny random Llama (the loader patched): renders, draws, follows a widget."""

from __future__ import annotations

import pytest

from specviz import methods
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.core.trace import bundle_json, load_traces
from tests.apptest import APP, app_on, chart_specs, chart_title

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


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_and_draws(tiny_app, page):
    at = app_on(page, max_new_tokens=8)
    assert not problems(at), (page, problems(at))
    assert chart_specs(at), f"{page} draws no figure"
    assert any("tiny-random" in c.value for c in at.sidebar.caption)  # the patched model ran


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


# two pages in the fast tier, every page in the full one
REPLAY = [
    pytest.param(p, marks=() if p in ("views/timeline.py", "views/medusa.py") else pytest.mark.full) for p in PAGES
]


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
