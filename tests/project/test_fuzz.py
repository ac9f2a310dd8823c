"""Property-based fuzzing of everything a visitor can hand the library: trace files, head folders and every
free-text Config field. Whatever comes in, the answer is a valid object or the project's own error, nothing else
(no TypeError, KeyError, IndexError, RecursionError, OSError, and no hang: each input is bounded first)."""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
import time
import tracemalloc
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from specviz import methods
from specviz.core.drafting import parse_layers
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace, TraceError, bundle_json, load_traces
from specviz.heads import eagle as eagle_heads
from specviz.heads import medusa as medusa_heads
from specviz.heads.eagle import HeadError
from specviz.heads.medusa import HeadsConfig, HeadsError
from tests.ui.test_pages_fast import tiny_kwargs

FUZZ = settings()  # the loaded profile (tests/conftest.py): 20 examples in the test tiers, 200 in scripts/soak.sh

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def valid(tiny_lm) -> list[dict]:
    """One real trace per method (each with its own step detail), as JSON data to mutate."""
    ids = tiny_lm.encode_prompt("the cat sat on the mat, the cat sat")
    out = []
    for name in methods.available():
        trace = methods.get(name).generate(tiny_lm, ids, Sampling(max_new_tokens=5), **tiny_kwargs(name, tiny_lm))
        out.append(json.loads(trace.to_json()))
    return out


def paths(node, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (the root excluded)."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


def mutated(data: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def loads_or_refuses(data, vocab: int | None = None) -> None:
    try:
        trace = Trace.from_dict(data, vocab)
    except TraceError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert load_traces(bundle_json([trace])) == [trace]  # what loads, round-trips


@FUZZ
@given(data=st.data())
def test_a_mutated_trace_loads_or_is_refused(valid, data):
    base = data.draw(st.sampled_from(valid))
    path = data.draw(st.sampled_from(paths(base)))
    value = data.draw(json_values)
    loads_or_refuses(mutated(base, path, value), data.draw(st.sampled_from([None, 49152])))


@FUZZ
@given(value=json_values)
def test_any_json_value_loads_or_is_refused(value):
    loads_or_refuses(value)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_any_file_content_loads_or_is_refused(raw):
    with contextlib.suppress(TraceError):
        load_traces(raw)


def draw_every_figure(trace: Trace) -> int:
    """Every figure the pages and `export --traces` build from one trace, every step's views included; the count."""
    from specviz.core import details as dt
    from specviz.output.viz import acceptance, eagle, jacobi, lookahead, tree
    from specviz.output.viz.gallery import figures

    drawn = len(figures({"ar": trace, trace.method: trace}))  # export's gallery, the cross-method figures too
    drawn += len([tree.token_strip(trace, upto=s.index) for s in trace.steps[:3]]) + 1
    tree.steps_figure(trace, None)
    steps = trace.steps if len(trace.steps) <= 40 else [*trace.steps[:20], *trace.steps[-20:]]  # a page shows one
    for step in steps:
        d = step.detail
        if isinstance(d, dt.EagleDetail):
            eagle.verify_figures(step)
            eagle.feature_figure(step)
            drawn += len([eagle.growth_figure(d.tree, k, d.path) for k in range(1, max(d.tree["depth"]) + 2)])
        elif isinstance(d, dt.MedusaDetail):
            parents, labels, status, hover = tree.step_tree_data(step)
            tree.tree_figure(parents, labels, status, hover, "t")
            tree.mask_figure(parents, labels, d.path, "m")
        elif isinstance(d, dt.LookaheadDetail):
            lookahead.window_figure(d), lookahead.verify_figure(d), lookahead.mask_figure(d.layout)
        elif isinstance(d, dt.JacobiDetail):
            jacobi.jacobi_grid_figure(trace, upto=step.index)
        elif isinstance(d, dt.ChainDetail) and acceptance.records(step):
            acceptance.decisions_figure(step)
            drawn += len([acceptance.rejection_figure(r["dists"]) for r in d.records if r.get("dists")])
        drawn += d is not None
    return drawn


def resized(data: dict, path: tuple, size: int) -> dict:
    """A copy of a trace with only a size changed: the list at `path` cut or grown to `size` items (its own, cycled),
    or the integer at `path` set to `size`."""
    node = mutated(data, path, None)
    parent, key, value = _at(node, path[:-1]), path[-1], _at(data, path)
    if isinstance(value, list):  # items shared, not copied: loading and drawing never change them
        parent[key] = [value[i % len(value)] for i in range(max(0, min(size, 20_000)))] if value else []
    elif isinstance(value, int) and not isinstance(value, bool):
        parent[key] = size
    return node


SIZES = st.one_of(st.integers(-3, 40), st.sampled_from([255, 289, 513, 4097, 10**6, 10**15]))


def draws_or_refuses(base: dict, path: tuple, size: int, memory: bool = False) -> None:
    """A trace changed in one size is refused in one sentence or drawn whole, within 20 s (with `memory`, within
    300 MB of allocations too; tracemalloc slows plotly several times, so the fast tier times only)."""
    start = time.perf_counter()
    if memory:
        tracemalloc.start()
    try:
        try:
            trace = Trace.from_dict(resized(base, path, size))
        except TraceError as exc:
            assert "\n" not in str(exc)
            return
        draw_every_figure(trace)
    finally:
        peak = tracemalloc.get_traced_memory()[1] if memory else 0
        tracemalloc.stop()
    budget = 90 if memory else 20  # seconds: tracemalloc makes plotly several times slower
    assert time.perf_counter() - start < budget and peak < 300 << 20, (path, size, peak)


def sized_paths(data: dict) -> list[tuple]:
    """Every path to a list or an integer inside a trace (the sizes and indices a figure is built from)."""
    return [p for p in paths(data) if isinstance(_at(data, p), (list, int)) and not isinstance(_at(data, p), bool)]


def _at(node, path: tuple):
    for k in path:
        node = node[k]
    return node


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_resized_trace_is_drawn_or_refused(valid, data):
    """Traces that loaded then crashed a page (a path node missing from verify_nodes, a Lookahead `matched` shorter
    than its candidates, a Jacobi offset past the output, ...): whatever loads, every figure draws."""
    base = data.draw(st.sampled_from(valid))
    draws_or_refuses(base, data.draw(st.sampled_from(sized_paths(base))), data.draw(SIZES))


@pytest.mark.soak
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_many_resized_traces_are_drawn_or_refused(valid, data):
    """The same, at soak length, with the memory budget: every method's trace, every size and index."""
    base = data.draw(st.sampled_from(valid))
    draws_or_refuses(base, data.draw(st.sampled_from(sized_paths(base))), data.draw(SIZES), memory=True)


@pytest.mark.soak
def test_every_real_trace_draws(valid):
    """The drawing harness itself reaches every method's own figures (it would pass vacuously otherwise)."""
    assert all(draw_every_figure(Trace.from_dict(v)) > 2 for v in valid)


@pytest.fixture(scope="module")
def folders(tiny_lm):
    """A saved EAGLE head (a reduced draft vocabulary) and Medusa heads for the tiny model, to corrupt copies of."""
    root = Path(tempfile.mkdtemp())
    eagle_heads.save_head(eagle_heads.new_head(tiny_lm.hf.config, draft_ids=torch.arange(100, 164)), root / "eagle")
    cfg = HeadsConfig(num_heads=2, hidden_size=64, draft_vocab=40, model="tiny")
    medusa_heads.save_heads(medusa_heads.new_heads(tiny_lm, cfg, torch.arange(40)), root / "medusa")
    return root


def corrupt_copy(src: Path, dst: Path, config_key: str | None, value, ids_key: str, ids: torch.Tensor | None) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    if config_key is not None:
        cfg[config_key] = value
    (dst / "config.json").write_text(json.dumps(cfg))
    weights = next(src.glob("*.safetensors"))
    state = load_file(str(weights))
    if ids is not None:
        state[ids_key] = ids
    save_file(state, str(dst / weights.name))


id_maps = st.one_of(
    st.none(),
    st.lists(st.integers(-5, 60000), max_size=80).map(lambda v: torch.tensor(v, dtype=torch.int64)),
    st.lists(st.floats(-1, 1e5, allow_nan=False), min_size=1, max_size=70).map(torch.tensor),
    st.integers(0, 3).map(lambda n: torch.zeros([2] * n, dtype=torch.int32)),
)


@FUZZ
@given(data=st.data())
def test_a_corrupted_eagle_head_loads_or_is_refused(tiny_lm, folders, data):
    keys = [f.name for f in fields(eagle_heads.HeadConfig)]
    key = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
    value = data.draw(st.one_of(json_values, st.integers(-10, 5000)))
    with tempfile.TemporaryDirectory() as tmp:
        corrupt_copy(folders / "eagle", Path(tmp), key, value, "draft_ids", data.draw(id_maps))
        try:
            head = eagle_heads.load_head(tmp, tiny_lm.hf.config)
        except HeadError as exc:
            assert "\n" not in str(exc)
            return
    assert ((head.draft_ids >= 0) & (head.draft_ids < tiny_lm.hf.config.vocab_size)).all()


@FUZZ
@given(data=st.data())
def test_corrupted_medusa_heads_load_or_are_refused(tiny_lm, folders, data):
    key = data.draw(st.one_of(st.none(), st.sampled_from([f.name for f in fields(HeadsConfig)])))
    value = data.draw(st.one_of(json_values, st.integers(-10, 100)))
    with tempfile.TemporaryDirectory() as tmp:
        corrupt_copy(folders / "medusa", Path(tmp), key, value, "vocab", data.draw(id_maps))
        try:
            heads = medusa_heads.load_heads(tiny_lm, Path(tmp))
        except HeadsError as exc:
            assert "\n" not in str(exc)
            return
    assert heads.vocab.max() < tiny_lm.hf.config.vocab_size


FIELDS = [(name, f.name) for name in methods.available() for f in fields(methods.get(name).Config)]
TEXT_FIELDS = [(n, f) for n, f in FIELDS if isinstance(getattr(methods.get(n).Config(), f), str)]


def test_the_fuzz_reaches_every_free_text_field():
    assert {("sps", "layers"), ("eagle", "head"), ("medusa", "heads_dir"), ("jacobi", "init")} <= set(TEXT_FIELDS)


@FUZZ
@given(field=st.sampled_from(TEXT_FIELDS), text=st.text(max_size=300))
def test_every_free_text_config_field_builds_or_is_refused(field, text):
    name, key = field
    try:
        cfg = methods.get(name).Config(**{key: text})
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    assert getattr(cfg, key) == text or (key, text) == ("rule", "greedy")


@FUZZ
@given(field=st.sampled_from(FIELDS), text=st.text(max_size=60))
def test_every_cli_option_builds_or_is_refused(field, text):
    """`--opt key=value` reaches every field as text, numbers included."""
    with contextlib.suppress(ConfigError):
        methods.make_config(field[0], {field[1]: text})


@FUZZ
@given(spec=st.text(alphabet="0123456789-, x", max_size=40), n=st.one_of(st.none(), st.integers(1, 64)))
def test_parse_layers_returns_layers_or_refuses(spec, n):
    try:
        layers = parse_layers(spec, n)
    except ConfigError:
        return
    assert layers == sorted(set(layers)) and layers[0] >= 0 and layers[-1] < (n or 1024)


@FUZZ
@given(
    n=st.integers(-5, 2**70),
    t=st.floats(allow_nan=True, allow_infinity=True),
    p=st.floats(allow_nan=True),
    seed=st.integers(-(2**70), 2**70),
)
def test_sampling_builds_or_is_refused(n, t, p, seed):
    try:
        s = Sampling(max_new_tokens=n, temperature=t, top_p=p, seed=seed)
    except ConfigError:
        return
    torch.Generator().manual_seed(s.seed)  # any seed that passes, torch takes
    assert s.greedy or torch.isfinite(torch.tensor([30.0]) / s.temperature).all()


@pytest.mark.soak
def test_resized_traces_that_load_replay_on_every_page(valid, tiny_app):
    """AppTest replay: a bundle of every method's trace, each resized at random (sizes only) until it still loads,
    uploaded and shown on every page: no exception and no traceback on any page."""
    import random

    from streamlit.testing.v1 import AppTest

    from tests.apptest import APP
    from tests.ui.test_pages_fast import PAGES, problems

    rng = random.Random(41)
    for _round in range(3):
        bundle = []
        for base in valid:
            for _try in range(20):  # a resized copy that loads (most sizes past a bound are refused)
                path, size = rng.choice(sized_paths(base)), rng.choice([0, 1, 2, 7, 33, 129, 288, 449])
                try:
                    bundle.append(Trace.from_dict(resized(base, path, size)))
                    break
                except TraceError:
                    continue
        at = AppTest.from_file(APP, default_timeout=300)
        at.run()
        at.file_uploader(key="replay.files").set_value(("f.json", bundle_json(bundle).encode(), "application/json"))
        at.run()
        assert set(at.session_state["replay.traces"]) == {t.method for t in bundle}, [e.value for e in at.error]
        for page in PAGES:
            at.switch_page(page).run()
            assert not at.exception, (page, [str(e.value) for e in at.exception])
            assert not [p for p in problems(at) if "Traceback" in p], page
