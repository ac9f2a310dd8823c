"""One saved bundle of traces, uploaded in the sidebar, replays on every page without an error."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from specviz import methods
from specviz.prompts import prepare
from specviz.sampling import Sampling
from specviz.trace import bundle_json, load_traces
from tests.apptest import APP, chart_specs

pytestmark = pytest.mark.real_model

PAGES = ["views/home.py", "views/timeline.py", "views/medusa.py", "views/eagle.py", "views/lookahead.py",
         "views/acceptance.py", "views/compare.py"]
PROMPT = "Name three rivers in Europe and one fact about each."


@pytest.fixture(scope="module")
def bundle(real_lm) -> bytes:
    """Every method's trace on one prompt, saved the way the pages' save button saves them."""
    ids = prepare(real_lm, PROMPT)
    s = Sampling(max_new_tokens=10)
    traces = [methods.get(name).generate(real_lm, ids, s, prompt=PROMPT) for name in methods.available()]
    data = bundle_json(traces)
    assert {t.method for t in load_traces(data)} == set(methods.available())
    return data.encode() if isinstance(data, str) else data


@pytest.mark.parametrize("page", PAGES)
def test_bundle_replays_on_page(bundle, page):
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.file_uploader(key="replay.files").set_value(("lecture.json", bundle, "application/json")).run()
    assert set(at.session_state["replay.traces"]) == set(methods.available())
    at.switch_page(page).run()
    assert not at.exception, page
    assert not at.error, [e.value for e in at.error]
    if page != "views/home.py":
        assert chart_specs(at), f"{page} draws the replayed traces"


def test_corrupt_bundle_is_a_clear_message():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.file_uploader(key="replay.files").set_value(("broken.json", b'{"method": ', "application/json")).run()
    assert not at.exception
    assert any("broken.json" in e.value for e in at.error)
