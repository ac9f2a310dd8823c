"""The contract every registered method keeps, checked the same way for each (no per-method code here).

On the sticky model (tests/conftest.py: a tiny Llama whose greedy answer depends on the whole context and whose
drafts are often right), every method's greedy output equals plain decoding token for token, with drafts accepted,
several in one step, in each method's important configurations (CONFIG_MATRIX); the contract is shown to bite: a
KV cache that keeps rejected drafts, or drafts verified one position too far, make it fail. A seeded run at T > 0
repeats exactly; the trace round-trips through JSON and its steps add up; the method's figures build from it.
Greedy identity also holds in the production dtype and kernels (fp32, oneDNN-prepacked on a CPU) on every
available device, and on the real model (every method, three prompts, with a floor on A for trained drafts).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import DynamicCache

from specviz import methods
from specviz.core.lean import KV
from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace, load_traces
from specviz.output.viz.gallery import figures, views
from tests.conftest import PROMPTS, method_kwargs
from tests.devices import DEVICES, production

METHODS = methods.available()
DRAFTING = [n for n in METHODS if n != "ar"]  # plain decoding proposes nothing
GREEDY = Sampling(max_new_tokens=40)
HOT = Sampling(max_new_tokens=10, temperature=1.0, top_p=0.95, seed=7)  # several steps; each is a top-p over V
# Jacobi refines guesses by reading the guess before each: on a model that tends to repeat the token it reads, a
# wrong guess predicts itself, so its guesses never converge here (on the real model its A is 1.00 too); its
# identity, its rollback and its figures are checked like every other method's, its acceptance in CONFIG_MATRIX
# rows that seed it with the right answer (tests/methods/test_jacobi.py: good guesses are committed at once).
NEVER_CONVERGES = {"jacobi"}

# each method's important configurations beyond its defaults, as Config changes, and the most drafts one step must
# have accepted (0: none asked; γ = 1 and N = 2 can commit one at most)
CONFIG_MATRIX = [
    ("sps", {"gamma": 1}, 1),
    ("sps", {"gamma": 4, "layers": "0-1"}, 2),  # the full depth: a draft that is the target accepts all
    ("sps", {"gamma": 3, "draft_vocab": 256}, 2),
    ("pld", {"adaptive": False, "max_draft": 5}, 2),
    ("pld", {"min_ngram": 2, "max_ngram": 4}, 2),
    ("medusa", {"total_tokens": 1}, 0),  # the root alone: nothing drafted
    ("medusa", {"total_tokens": 13}, 2),
    ("hydra", {"total_tokens": 13}, 2),
    ("eagle", {"tree": "static", "depth": 3, "top_k": 2, "total_tokens": 5}, 2),
    ("eagle", {"depth": 6, "top_k": 10, "total_tokens": 40}, 2),
    ("eagle3", {"tree": "static", "depth": 3, "top_k": 2, "total_tokens": 5}, 2),
    ("eagle3", {"depth": 5, "top_k": 6, "total_tokens": 24}, 2),
    ("hybrid", {"depth": 5, "top_k": 4, "total_tokens": 16}, 2),
    # the confidence budget: a floor of nodes, more where the draft is sure, deeper only while it is
    ("eagle", {"depth": 4, "top_k": 4, "total_tokens": 10, "min_tokens": 4, "node_floor": 0.2, "depth_floor": 0.3}, 2),
    ("eagle3", {"depth": 4, "top_k": 4, "total_tokens": 10, "min_tokens": 4, "node_floor": 0.2, "depth_floor": 0.3}, 2),
    ("hybrid", {"depth": 4, "top_k": 4, "total_tokens": 10, "min_tokens": 4, "node_floor": 0.2, "depth_floor": 0.3}, 2),
    ("jacobi", {"guesses": 1, "init": "pad"}, 0),
    ("jacobi", {"guesses": 4, "init": "random"}, 0),
    ("lookahead", {"window": 2, "ngram": 2, "guesses": 1, "init": "pad"}, 1),
    ("lookahead", {"window": 5, "ngram": 4, "guesses": 5, "init": "random"}, 2),
    ("lookahead", {"guesses": 0, "seed_prompt": False}, 0),
    ("lookahead", {"window_vocab": 256}, 2),  # no n-gram verified: plain steps
]

_PLAIN: dict[tuple, Trace] = {}


def _ar(lm: LoadedModel, ids: list[int], s: Sampling) -> Trace:
    """Plain decoding's trace, run once per (model, prompt, settings)."""
    key = (lm.name, str(lm.device), lm.dtype, lm.kernels, tuple(ids), s)
    if key not in _PLAIN:
        _PLAIN[key] = methods.get("ar").generate(lm, list(ids), s)
    return _PLAIN[key]


def run(lm: LoadedModel, ids: list[int], name: str, options: dict | None = None, s: Sampling = GREEDY) -> Trace:
    return methods.get(name).generate(lm, ids, s, **method_kwargs(name, lm, options))


def assert_drafts_accepted(trace: Trace, least: int = 2) -> None:
    """Drafts were accepted (A > 1), `least` of them in some one step."""
    assert trace.mean_accepted > 1.0, f"{trace.method}: A = {trace.mean_accepted:.2f}, no drafts accepted"
    depth = max(s.drafts_accepted for s in trace.steps)
    assert depth >= least, f"{trace.method}: at most {depth} drafted token(s) accepted in one step"


@pytest.fixture(scope="module")
def runs(sticky, sticky_prompt) -> dict[str, Trace]:
    """name -> its greedy trace on the sticky model, each run once; 'ar' is plain decoding."""
    return {n: run(sticky, sticky_prompt, n) for n in METHODS}


def test_the_sticky_answer_depends_on_the_context(runs, sticky, sticky_prompt):
    """Plain decoding's answer holds many distinct tokens, and another context changes it (so a cache or position
    bug that changes what a token attends to shows in the output)."""
    plain = runs["ar"].output_ids
    assert len(set(plain)) >= 10, plain
    assert _ar(sticky, sticky_prompt[1:], GREEDY).output_ids != plain


@pytest.mark.parametrize("name", DRAFTING)
def test_greedy_equals_plain_decoding_with_drafts_accepted(runs, name):
    trace = runs[name]
    assert trace.method == name and trace.output_ids == runs["ar"].output_ids
    if name not in NEVER_CONVERGES:
        assert_drafts_accepted(trace)


@pytest.mark.parametrize(
    ("name", "options", "least"), CONFIG_MATRIX, ids=[f"{m}-{i}" for i, (m, *_) in enumerate(CONFIG_MATRIX)]
)
def test_every_important_configuration_equals_plain_decoding(runs, sticky, sticky_prompt, name, options, least):
    trace = run(sticky, sticky_prompt, name, options)
    assert trace.output_ids == runs["ar"].output_ids
    if least:
        assert_drafts_accepted(trace, least)
    if name.startswith("eagle") and not options.get("min_tokens"):  # a fixed budget: exactly total_tokens nodes
        assert all(s.forward_tokens in (0, options["total_tokens"]) for s in trace.steps)
    elif options.get("min_tokens"):  # the confidence budget: between its floor and total_tokens, and not always full
        sizes = [s.forward_tokens for s in trace.steps if s.forward_tokens]
        assert all(options["min_tokens"] <= n <= options["total_tokens"] for n in sizes), sizes
        assert min(sizes) < options["total_tokens"], sizes


def _differs(lm: LoadedModel, ids: list[int], name: str, want: list[int]) -> bool:
    """True when the method's greedy output differs from `want` or the run fails."""
    try:
        return run(lm, ids, name).output_ids != want
    except (RuntimeError, ValueError, IndexError):
        return True


def keep_rejected_drafts(monkeypatch) -> None:
    """Mutation: rolling back either KV cache does nothing (transformers' and core.lean's), so rejected drafts stay
    in the context."""
    monkeypatch.setattr(DynamicCache, "crop", lambda self, n: None)
    monkeypatch.setattr(KV, "crop", lambda self, n: None)
    keep_path = KV.keep_path

    def keeps_everything(self, prefix, path):
        held = self.length
        keep_path(self, prefix, path)  # the path's slots packed, but nothing after them dropped
        self.length = max(held, self.length)

    monkeypatch.setattr(KV, "keep_path", keeps_everything)


def shift_drafts_one_position(monkeypatch) -> None:
    """Mutation: in every verify pass (several new tokens on a cache), the tokens after the root sit one position
    too far (RoPE), in transformers' forward and in core.lean's."""
    inputs, lean = LoadedModel._model_inputs, LoadedModel._lean

    def shifted(self, ids, cache, positions, mask):
        out = inputs(self, ids, cache, positions, mask)
        pos = out["position_ids"]
        if pos.shape[1] > 1 and cache.get_seq_length() > 0:
            out["position_ids"] = torch.cat([pos[:, :1], pos[:, 1:] + 1], dim=1)
        return out

    def shifted_lean(self, ids, cache, layers, positions, mask, logits_for):
        q, past = len(ids), cache.get_seq_length()
        if q > 1 and past > 0:
            pos = torch.arange(past, past + q) if positions is None else positions.cpu()
            positions = torch.cat([pos[:1], pos[1:] + 1])
        return lean(self, ids, cache, layers, positions, mask, logits_for)

    monkeypatch.setattr(LoadedModel, "_model_inputs", shifted)
    monkeypatch.setattr(LoadedModel, "_lean", shifted_lean)


def test_the_contract_catches_a_cache_that_keeps_rejected_drafts(runs, sticky, sticky_prompt, monkeypatch):
    """Mutation: rolling back the KV cache does nothing, so rejected drafts stay in the context. The identity
    check must fail for every drafting method."""
    keep_rejected_drafts(monkeypatch)
    kept = [n for n in DRAFTING if not _differs(sticky, sticky_prompt, n, runs["ar"].output_ids)]
    assert not kept, f"a cache keeping rejected drafts went unnoticed for {kept}"


def test_the_contract_catches_drafts_verified_one_position_off(runs, sticky, sticky_prompt, monkeypatch):
    """Mutation: in every verify pass (several new tokens on a cache), the tokens after the root sit one position
    too far (RoPE). The identity check must fail for every method that commits drafts."""
    shift_drafts_one_position(monkeypatch)
    committing = [n for n in DRAFTING if n not in NEVER_CONVERGES]
    kept = [n for n in committing if not _differs(sticky, sticky_prompt, n, runs["ar"].output_ids)]
    assert not kept, f"drafts one position off went unnoticed for {kept}"


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_equals_plain_decoding_in_the_production_dtype(sticky, sticky_prompt, device):
    lm = production(sticky, device)
    plain = _ar(lm, sticky_prompt, GREEDY)
    for name in DRAFTING:
        trace = run(lm, sticky_prompt, name)
        assert "float32" in trace.device and "float32" in plain.device
        assert trace.output_ids == plain.output_ids, name


@pytest.mark.parametrize("name", METHODS)
def test_seeded_sampling_repeats_exactly(sticky, sticky_prompt, name):
    a, b = (run(sticky, sticky_prompt, name, s=HOT) for _ in range(2))
    assert a.output_ids == b.output_ids and [s.committed for s in a.steps] == [s.committed for s in b.steps]
    assert Trace.from_json(a.to_json()) == a


@pytest.mark.parametrize("name", METHODS)
def test_trace_round_trips_and_its_steps_add_up(runs, name):
    trace = runs[name]
    assert Trace.from_json(trace.to_json()) == trace
    assert load_traces(trace.to_json()) == [trace]
    for s in trace.steps:
        assert s.committed and s.accepted == len(s.committed) and s.drafts_accepted <= s.proposed
        assert s.propose_s + s.verify_s + s.accept_s + s.commit_s <= s.wall_s + 1e-6
        assert s.detail is None or s.forward_tokens > 0


@pytest.mark.parametrize("name", METHODS)
def test_figures_build_from_the_trace(runs, name):
    replayed = Trace.from_json(runs[name].to_json())
    figs = figures({"ar": runs["ar"], name: replayed})
    assert {"timeline", "tokens_over_time"} <= set(figs)
    lines = [t.get("name") for t in figs["tokens_over_time"].to_dict()["data"]]
    assert sorted(lines) == sorted({"ar", name}), lines  # one line per trace: the replayed one is drawn too
    mine = [k for k in figs if k.startswith(f"{name}_")]
    assert mine or views(name) is None, f"{name}'s own views drew nothing: {sorted(figs)}"  # as its page registers


# the fewest tokens per step each method's shipped drafts reach on the real model (3 prompts x 32 tokens; measured
# A with its figure in the README's Tests section); methods without trained drafts only need identity
REAL_MIN_A = {"eagle": 1.3, "eagle3": 1.3, "hybrid": 1.3, "medusa": 1.1, "hydra": 1.1, "sps": 1.1, "pld": 1.0}


REAL_MATRIX = [(n, {}) for n in DRAFTING] + [("lookahead", {"window": 5, "ngram": 4, "guesses": 2, "init": "pad"})]


@pytest.mark.real_model
@pytest.mark.parametrize(("name", "options"), REAL_MATRIX, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REAL_MATRIX)])
def test_greedy_equals_plain_decoding_on_the_real_model(real_lm, name, options):
    s = Sampling(max_new_tokens=32)
    module, traces = methods.get(name), []
    config = replace(module.Config(), **options) if options else None
    for prompt in PROMPTS:
        ids = real_lm.encode_prompt(prompt)
        traces.append(module.generate(real_lm, ids, s, **({"config": config} if config else {})))
        assert traces[-1].output_ids == _ar(real_lm, ids, s).output_ids, prompt
    if name == "eagle":  # the shipped default grows its tree dynamically (EAGLE-2), and the trace says so
        assert traces[0].steps[0].detail.tree["kind"] == "dynamic"  # type: ignore[union-attr]
    a = sum(t.mean_accepted for t in traces) / len(traces)
    assert a >= REAL_MIN_A.get(name, 1.0), f"{name}: A = {a:.2f} on the real model"
