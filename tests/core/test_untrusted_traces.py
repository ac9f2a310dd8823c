"""Traces from visitors: every malformed file is refused with the project's own error, in one sentence."""

from __future__ import annotations

import copy
import json

import pytest

from specviz import methods
from specviz.core.sampling import Sampling
from specviz.core.trace import MAX_TRACE_BYTES, MAX_TRACE_IDS, Trace, TraceError, bundle_json, load_traces
from specviz.methods import ar
from tests.ui.test_pages_fast import tiny_kwargs


@pytest.fixture(scope="module")
def good(tiny_lm) -> dict:
    return ar.generate(tiny_lm, tiny_lm.encode_prompt("Hi"), Sampling(max_new_tokens=4)).to_dict()


@pytest.fixture(scope="module")
def detailed(tiny_lm) -> dict[str, dict]:
    """One trace per method with a step detail, as plain JSON data."""
    ids = tiny_lm.encode_prompt("the cat the cat the cat")
    out = {}
    for name in ("sps", "medusa", "eagle", "lookahead"):
        trace = methods.get(name).generate(tiny_lm, ids, Sampling(max_new_tokens=6), **tiny_kwargs(name, tiny_lm))
        out[name] = json.loads(trace.to_json())
    return out


def edited(data: dict, path: tuple, value) -> dict:
    """A deep copy of data with the value at path replaced."""
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    "path, value, reason",
    [
        (("steps", 0, "top", 0), [1, 2], "top"),  # a top entry of the wrong shape (was a TypeError)
        (("steps", 0, "top"), "abc", "top"),
        (("method",), ["ar"], "method"),  # a list-valued method (was a TypeError: unhashable)
        (("prompt_ids",), ["a", "b"], "prompt_ids"),
        (("prompt_ids",), [-1], "prompt_ids"),
        (("prompt_ids",), [1 << 30], "prompt_ids"),
        (("prompt_ids",), list(range(MAX_TRACE_IDS + 1)), "prompt_ids"),
        (("steps", 0, "committed"), "ab", "committed"),
        (("steps", 0, "texts"), [1], "texts"),
        (("steps", 0, "index"), "0", "index"),
        (("steps", 0, "prob"), None, "prob"),
        (("steps", 0, "wall_s"), True, "wall_s"),
        (("config",), [], "config"),
        (("config", "sampling", "temperature"), "hot", "temperature"),
        (("config", "method"), 3, "config.method"),
        (("text",), 5, "text"),
        (("total_s",), -2, "invalid number"),
        (("steps",), {}, "steps"),
    ],
)
def test_wrong_typed_fields_are_refused(good, path, value, reason):
    with pytest.raises(TraceError, match=reason) as err:
        Trace.from_dict(edited(good, path, value))
    assert "\n" not in str(err.value)


def test_deep_nesting_is_refused_not_a_recursion_error(good):
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(TraceError, match="nests"):
        Trace.from_dict(edited(good, ("config", "x"), deep))
    with pytest.raises(TraceError, match="nests too deep"):
        load_traces("[" * 200_000 + "]" * 200_000)


def test_ids_are_checked_against_a_known_vocabulary(good, tiny_lm):
    vocab = tiny_lm.hf.config.vocab_size
    assert Trace.from_dict(good, vocab) == Trace.from_dict(good)
    bad = edited(good, ("prompt_ids",), [*good["prompt_ids"][:-1], vocab])
    Trace.from_dict(bad)  # in range of any vocabulary specviz loads...
    with pytest.raises(TraceError, match=f"between 0 and {vocab - 1}"):
        Trace.from_dict(bad, vocab)  # ...but not of this model's
    with pytest.raises(TraceError, match="prompt_ids"):
        load_traces(json.dumps(bad), vocab)


def test_oversized_files_are_refused_before_parsing():
    with pytest.raises(TraceError, match="larger than"):
        load_traces(b" " * (MAX_TRACE_BYTES + 1))


@pytest.mark.parametrize(
    "method, path, value",
    [
        ("sps", ("records", 0, "p"), "x"),
        ("sps", ("records", 0), 7),
        ("sps", ("records", 0, "dists", "tokens"), [None]),
        ("medusa", ("nodes", 0, "status"), 3),
        ("medusa", ("nodes", 0), {"token": 1}),
        ("eagle", ("tree", "parents"), ["root"]),
        ("eagle", ("tree",), {"kind": "dynamic"}),
        ("eagle", ("features", "f_t"), [[1.0]]),
        ("lookahead", ("window",), [[1, "a"]]),
        ("lookahead", ("layout", "width"), 2.5),
    ],
)
def test_nested_records_of_a_detail_are_typed(detailed, method, path, value):
    """The records a figure reads inside a step's detail (tree, nodes, decisions) are typed too."""
    data = detailed[method]
    i = next(j for j, s in enumerate(data["steps"]) if s["detail"] is not None and _has(s["detail"], path))
    with pytest.raises(TraceError, match="step detail"):
        Trace.from_dict(edited(data, ("steps", i, "detail", *path), value))


@pytest.mark.parametrize(
    "method, path, value",
    [
        ("eagle", ("path",), [0, 999]),  # a node past the tree: an IndexError in the growth figure
        ("eagle", ("tree", "parents", 1), 7),  # a parent after its child
        ("eagle", ("tree", "kept"), []),  # per-node lists of different lengths
        ("eagle", ("verify_parents",), [-1]),
        ("medusa", ("path",), [99]),
        ("medusa", ("nodes",), []),
        ("sps", ("n_accepted",), 99),
    ],
)
def test_a_detail_whose_indices_do_not_fit_is_refused(detailed, method, path, value):
    """Typed but inconsistent: what a figure would index out of range."""
    data = detailed[method]
    i = next(j for j, s in enumerate(data["steps"]) if s["detail"] is not None and _has(s["detail"], path))
    with pytest.raises(TraceError, match="inconsistent"):
        Trace.from_dict(edited(data, ("steps", i, "detail", *path), value))


def _has(node, path: tuple) -> bool:
    for key in path:
        found = key < len(node) if isinstance(node, list) else isinstance(node, dict) and key in node
        if not found:
            return False
        node = node[key]
    return True


def test_every_method_round_trips(detailed):
    for data in detailed.values():
        trace = Trace.from_dict(data)
        assert load_traces(bundle_json([trace])) == [trace]


def test_regrowing_a_step_checks_the_traces_ids_before_the_model_runs(tiny_lm):
    """replay_trees ran the target on a trace's prompt_ids unchecked: an id past the vocabulary was an IndexError
    here and a device-side assert (for every session) on CUDA; a prompt past the context was a long prefill."""
    from dataclasses import replace

    from specviz.tuning.eagle_replay import replay_trees

    kw = tiny_kwargs("eagle", tiny_lm)
    trace = methods.get("eagle").generate(tiny_lm, tiny_lm.encode_prompt("Hi"), Sampling(max_new_tokens=4), **kw)
    vocab, n = tiny_lm.hf.config.vocab_size, tiny_lm.hf.config.max_position_embeddings
    for bad, reason in (([vocab], "vocabulary"), ([-1], "vocabulary"), ([5] * n, "context")):
        with pytest.raises(TraceError, match=reason):
            replay_trees(tiny_lm, replace(trace, prompt_ids=bad), 0, kw.get("config"), head=kw.get("head"))
    with pytest.raises(TraceError, match="no step 99"):
        replay_trees(tiny_lm, trace, 99, kw.get("config"), head=kw.get("head"))
