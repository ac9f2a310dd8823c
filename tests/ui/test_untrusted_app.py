"""The served app under visitors' input: uploads bounded, replayed traces never run the model, the Model box and
folder fields refused with one message, and no page ends in a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from specviz.core.sampling import Sampling
from specviz.core.trace import MAX_TRACE_BYTES, bundle_json
from specviz.methods import ar, eagle
from tests.apptest import APP, app_on
from tests.ui.test_pages_fast import tiny_kwargs

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_limits_uploads_to_a_trace_file():
    import tomllib

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert server["maxUploadSize"] << 20 == MAX_TRACE_BYTES and server["maxUploadSize"] <= 16


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    return at.file_uploader(key="replay.files").set_value((name, data, "application/json")).run()


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_an_oversized_upload_is_refused_before_it_is_read(tiny_app):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    upload(at, "huge.json", b" " * (MAX_TRACE_BYTES + 1))
    assert not at.exception
    assert any("huge.json" in e.value and "more than a trace file may be" in e.value for e in at.error)


@pytest.fixture(scope="module")
def eagle_bundle(tiny_lm) -> bytes:
    ids = tiny_lm.encode_prompt("Count to ten: one two three")
    trace = eagle.generate(tiny_lm, ids, Sampling(max_new_tokens=8), **tiny_kwargs("eagle", tiny_lm))
    plain = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=8))  # so the page shows a speedup
    return bundle_json([plain, trace]).encode()


@pytest.fixture
def spies(tiny_app, monkeypatch) -> dict[str, list]:
    """Count model loads and tree re-growths (the page imports replay_trees afresh on every run)."""
    import ui.resources as resources
    from specviz.tuning import eagle_replay

    calls: dict[str, list] = {"load": [], "replay": []}
    real_replay = eagle_replay.replay_trees
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_kw: calls["load"].append(spec) or tiny_app)

    def replay(lm, trace, *args, **kwargs):
        calls["replay"].append(trace)
        return real_replay(lm, trace, *args, **kwargs)

    monkeypatch.setattr(eagle_replay, "replay_trees", replay)
    return calls


def forget_model(spies: dict[str, list]) -> None:
    """Drop the cached model and the calls so far: a later get_model would load it again, and be counted."""
    import ui.resources as resources

    resources.clear()
    spies["load"].clear()


def test_replay_never_loads_or_runs_the_model(spies, eagle_bundle):
    """The EAGLE page re-grew the uploaded trace's trees on its prompt_ids, through a cache keyed without them."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["eagle.repeats"] = 1
    at.run()
    forget_model(spies)  # the first run, before the upload, loads it as usual
    upload(at, "eagle.json", eagle_bundle)
    at.switch_page("views/eagle.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert spies == {"load": [], "replay": []}
    assert any("not while traces are loaded" in c.value for c in at.caption)
    # a replayed speedup says it comes from a saved trace (it read as if measured here, now)
    assert any("From saved traces run on" in (m.help or "") for m in at.metric), [m.help for m in at.metric]


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_live_regrowth_is_keyed_on_its_own_run(spies, tiny_app):
    """Live, the trees are re-grown from this session's own run (the cache key holds the run's content)."""
    at = app_on("views/eagle.py", max_new_tokens=8, prompt="Count to ten: one two three")
    assert not at.exception
    if spies["replay"]:  # the random-weights model may draft no step; when it does, the run is this session's
        assert all(t.model == tiny_app.name and t.prompt == "Count to ten: one two three" for t in spies["replay"])


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_home_page_does_not_decode_while_replaying(spies, eagle_bundle):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    forget_model(spies)
    upload(at, "eagle.json", eagle_bundle)
    assert not at.exception and spies["load"] == []
    assert any("not run while traces are loaded" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "home.run"]


@pytest.mark.parametrize(
    "config, reason",
    [
        ({"model_type": "gpt2", "n_positions": 1024}, "Llama-like"),
        ({"model_type": "llama", "max_position_embeddings": 128}, "context of 128 tokens"),
        ({"model_type": "llama", "max_position_embeddings": 4096, "num_hidden_layers": 80}, "parameters"),
        ({"model_type": "llama", "max_position_embeddings": "long"}, "usable context"),
    ],
)
def test_model_box_refuses_what_it_cannot_drive(tmp_path, config, reason, monkeypatch):
    """The real loader (not patched): the folder's config is checked before any weights are read."""
    import specviz.output.lesson.visitor as visitor

    sizes = {"vocab_size": 49152, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 2}
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text(json.dumps({**sizes, **config}))
    monkeypatch.setattr(visitor, "MODELS", tmp_path / "models")  # the box reads folders under models/ only
    at = app_on("views/home.py", model="models/m")
    assert not at.exception
    assert any(reason in e.value for e in at.error), [e.value for e in at.error]


SMALL = {"model_type": "llama", "max_position_embeddings": 2048, "vocab_size": 100, "hidden_size": 64}
SMALL |= {"intermediate_size": 128, "num_hidden_layers": 2}


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_any_model_failure_is_one_message(tiny_app, monkeypatch):
    import specviz.output.lesson.visitor as visitor
    import ui.resources as resources

    def broken(spec="default", **_kw):
        raise KeyError("rope_scaling")

    monkeypatch.setattr(resources, "load_model", broken)
    monkeypatch.setattr(visitor, "hub_config", lambda spec: SMALL)  # no hub call from a test
    at = app_on("views/home.py", model="some/model")
    assert not at.exception
    assert any("Could not load model 'some/model'" in e.value for e in at.error)


def controls_script() -> None:
    import streamlit as st

    from ui.common import config_controls

    st.session_state["result"] = repr(config_controls(st.session_state["method"]))


@pytest.mark.parametrize(
    "method, field, value, ok",
    [
        ("eagle", "head", "/etc", False),
        ("eagle", "head", "models/../..", False),
        ("medusa", "heads_dir", "/tmp", False),
        ("eagle", "head", "", True),
        ("eagle", "head", "random", True),
        ("medusa", "heads_dir", "models/medusa", True),
    ],
)
def test_folder_fields_stay_inside_models(method, field, value, ok, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = AppTest.from_function(controls_script, default_timeout=60)
    at.session_state["method"] = method
    at.session_state[f"cfg.{method}.{field}"] = value
    at.run()
    assert not at.exception
    assert (at.session_state["result"] != "None") == ok
    assert ok or any("inside models/" in w.value for w in at.warning)
