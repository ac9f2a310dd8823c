"""The contract every registered method keeps, checked the same way for each (no per-method code here).

Greedy output equals plain decoding token for token (tiny random model and the real one); drafts are accepted,
several in one step, on a model built to be predictable, with output still equal to plain decoding; a seeded run
at T > 0 repeats exactly; the trace round-trips through JSON; the method's figures build from the trace.
Every check runs on each available device (the CPU, and a GPU when there is one): on the CPU in float64, where
argmax ties cannot flip, and on a GPU in the dtype production runs there (fp32); greedy identity is checked on every
device in the production dtype and kernels too (fp32, oneDNN-prepacked on the CPU).
A method that needs resources the tiny model lacks (trained heads, enough layers) provides
`tiny_resources(lm) -> generate keyword arguments` in its module, and `accepting_resources(lm)` where its drafts
need more to be right on the predictable model (heads that hand the target's own prediction on).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import replace

import pytest
import torch

from specviz import methods
from specviz.core.model import Resources
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace, load_traces
from specviz.output.viz.gallery import figures
from tests.conftest import PROMPTS
from tests.devices import DEVICES, production

METHODS = methods.available()
GREEDY = Sampling(max_new_tokens=24)
DRAFTING = [n for n in METHODS if n != "ar"]  # plain decoding proposes nothing
STEADY = " story"  # the one token the steady model says; its prompt repeats it, so prompt lookup finds it there
HOT = Sampling(max_new_tokens=10, temperature=1.0, top_p=0.95, seed=7)  # several steps; each is a top-p over V


def tiny_kwargs(name: str, lm) -> dict:
    """The method's own tiny-model resources (its `tiny_resources` hook), else none."""
    hook = getattr(methods.get(name), "tiny_resources", None)
    return hook(lm) if hook is not None else {}


_PLAIN: dict[tuple, Trace] = {}


def _ar(lm, ids: tuple[int, ...], s: Sampling) -> Trace:
    """Plain decoding's trace, run once per (model, prompt, settings)."""
    key = (lm.name, str(lm.device), lm.dtype, lm.kernels, ids, s)
    if key not in _PLAIN:
        _PLAIN[key] = methods.get("ar").generate(lm, list(ids), s)
    return _PLAIN[key]


@pytest.fixture(scope="module", params=DEVICES)
def lm(request, tiny_lm):
    """The tiny model on every available device: float64 on the CPU, a copy in production's dtype on a GPU."""
    return tiny_lm if request.param == "cpu" else production(tiny_lm, request.param)


@pytest.fixture(scope="module")
def tiny_runs(lm):
    """name -> (greedy trace, plain decoding's trace) on the tiny model, each run once."""
    ids = lm.encode_prompt("Tell me a story about a story")
    plain = _ar(lm, tuple(ids), GREEDY)
    return {n: (methods.get(n).generate(lm, ids, GREEDY, **tiny_kwargs(n, lm)), plain) for n in METHODS}


@pytest.mark.parametrize("name", METHODS)
def test_greedy_equals_plain_decoding_on_the_tiny_model(tiny_runs, name):
    trace, plain = tiny_runs[name]
    assert trace.method == name and trace.output_ids == plain.output_ids


@pytest.fixture(scope="module", params=DEVICES)
def production_runs(request, tiny_lm):
    """name -> (greedy trace, plain decoding's trace) on the tiny model in production's dtype and kernels."""
    lm = production(tiny_lm, request.param)
    ids = lm.encode_prompt("Tell me a story about a story")
    plain = _ar(lm, tuple(ids), GREEDY)
    return {n: (methods.get(n).generate(lm, ids, GREEDY, **tiny_kwargs(n, lm)), plain) for n in METHODS}


@pytest.mark.parametrize("name", METHODS)
def test_greedy_equals_plain_decoding_in_the_production_dtype(production_runs, name):
    trace, plain = production_runs[name]
    assert "float32" in trace.device and "float32" in plain.device
    assert trace.output_ids == plain.output_ids


@pytest.mark.parametrize("name", METHODS)
def test_seeded_sampling_repeats_exactly(lm, name):
    ids, kw = lm.encode_prompt("Count to five"), tiny_kwargs(name, lm)
    a, b = (methods.get(name).generate(lm, ids, HOT, **kw) for _ in range(2))
    assert a.output_ids == b.output_ids and [s.committed for s in a.steps] == [s.committed for s in b.steps]
    assert Trace.from_json(a.to_json()) == a


@pytest.mark.parametrize("name", METHODS)
def test_trace_round_trips_and_its_steps_add_up(tiny_runs, name):
    trace, _ = tiny_runs[name]
    assert Trace.from_json(trace.to_json()) == trace
    assert load_traces(trace.to_json()) == [trace]
    for s in trace.steps:
        assert s.committed and s.accepted == len(s.committed) and s.drafts_accepted <= s.proposed
        assert s.propose_s + s.verify_s + s.accept_s + s.commit_s <= s.wall_s + 1e-6
        assert s.detail is None or s.forward_tokens > 0


@pytest.mark.parametrize("name", METHODS)
def test_figures_build_from_the_trace(tiny_runs, name):
    trace, plain = tiny_runs[name]
    replayed = Trace.from_json(trace.to_json())
    figs = figures({"ar": plain, name: replayed})
    assert {"timeline", "tokens_over_time"} <= set(figs)
    lines = [t.get("name") for t in figs["tokens_over_time"].to_dict()["data"]]
    assert sorted(lines) == sorted({"ar", name}), lines  # one line per trace: the replayed one is drawn too


@pytest.fixture(scope="module", params=DEVICES)
def steady(request, tiny_lm):
    """The tiny model made to say STEADY after anything, on every available device. Every embedding (tied to the
    LM head) gains 50 on dimension 0 and STEADY's 55, so the final hidden state points along dimension 0 whatever
    the layers add and the largest logit is STEADY's; the layers, attention and KV cache still run as ever."""
    token = tiny_lm.tokenizer.encode(STEADY)[0]
    hf = copy.deepcopy(tiny_lm.hf)
    with torch.no_grad():
        weight = hf.get_input_embeddings().weight
        weight[:, 0] = 50.0
        weight[token, 0] += 5.0
    lm = replace(tiny_lm, hf=hf, name="tiny-steady", lock=threading.Lock(), resources=Resources())
    return lm if request.param == "cpu" else production(lm, request.param)


@pytest.fixture(scope="module")
def steady_runs(steady):
    """name -> (greedy trace, plain decoding's trace) on the steady model, with each method's accepting_resources
    (else its tiny_resources): drafts every method can get right."""
    ids = steady.encode_prompt(STEADY * 12)
    plain = _ar(steady, tuple(ids), GREEDY)
    runs = {}
    for n in DRAFTING:
        module = methods.get(n)
        hook = getattr(module, "accepting_resources", None) or getattr(module, "tiny_resources", None)
        runs[n] = (module.generate(steady, ids, GREEDY, **(hook(steady) if hook else {})), plain)
    return runs


@pytest.mark.parametrize("name", DRAFTING)
def test_drafts_are_accepted_and_greedy_still_equals_plain_decoding(steady_runs, name):
    trace, plain = steady_runs[name]
    assert len(set(plain.output_ids)) == 1  # the model is steady: plain decoding repeats one token
    assert trace.method == name and trace.output_ids == plain.output_ids
    assert trace.mean_accepted > 1.0, f"A = {trace.mean_accepted:.2f}: no drafts accepted"
    depth = max(s.drafts_accepted for s in trace.steps)
    assert depth >= 2, f"at most {depth} drafted token(s) accepted in one step"


@pytest.mark.real_model
@pytest.mark.parametrize("name", METHODS)
def test_greedy_equals_plain_decoding_on_the_real_model(real_lm, name):
    s = Sampling(max_new_tokens=32)
    for prompt in PROMPTS:
        ids = real_lm.encode_prompt(prompt)
        got = methods.get(name).generate(real_lm, ids, s)
        assert got.output_ids == _ar(real_lm, tuple(ids), s).output_ids, prompt
