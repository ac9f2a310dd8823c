"""sps: greedy identity with ar, the draft's own cache, trace records, and losslessness when sampling."""

from __future__ import annotations

import pytest
import torch

from specviz.core.sampling import ConfigError, Sampling
from specviz.methods import sps
from specviz.tuning import lossless
from tests.conftest import make_tiny


@pytest.fixture(scope="module")
def tiny4(tokenizer):
    """A 4-layer tiny model, so a 2-layer prefix draft is a real (and imperfect) draft."""
    return make_tiny(tokenizer, seed=1, layers=4)


def test_parse_layers() -> None:
    assert sps.parse_layers("0-3", 30) == [0, 1, 2, 3]
    assert sps.parse_layers("0,1, 29", 30) == [0, 1, 29]
    for bad in ("", "a-b", "3-40", "-1"):
        with pytest.raises(ConfigError):
            sps.parse_layers(bad, 30)
    with pytest.raises(ConfigError):
        sps.Config(rule="magic")
    for bad in (-1, 17):
        with pytest.raises(ConfigError):
            sps.Config(gamma=bad)


def test_the_default_draft_falls_back_to_the_first_layers_where_no_trained_one_fits(tiny4) -> None:
    """auto: where models/draft does not fit the model (a 64-wide one here) the first layers draft, at their γ; a
    named `layers` always asks for the prefix; draft=trained on such a model is a ConfigError, not a traceback."""
    small = sps.resolve(tiny4, sps.Config())
    assert (small.draft, small.layers, small.gamma) == ("layers", sps.PREFIX, sps.PREFIX_GAMMA)
    asked = sps.resolve(tiny4, sps.Config(layers="0-1", gamma=2))
    assert (asked.draft, asked.layers, asked.gamma) == ("layers", "0-1", 2)
    trace = sps.generate(tiny4, tiny4.encode_prompt("Hi"), Sampling(max_new_tokens=6), sps.Config())
    ran = trace.config["method"]
    assert (ran["draft"], ran["layers"], ran["gamma"]) == ("layers", "0-3", 3)
    with pytest.raises(ConfigError):
        sps.generate(tiny4, tiny4.encode_prompt("Hi"), Sampling(max_new_tokens=4), sps.Config(draft="trained"))


@pytest.mark.real_model
def test_the_default_draft_is_the_trained_one_at_its_swept_gamma(real_lm) -> None:
    best = sps.swept_gamma()
    assert best is not None  # models/draft/gamma_sweep.json is committed
    ids = real_lm.encode_prompt("Name three colours.")
    trace = sps.generate(real_lm, ids, Sampling(max_new_tokens=16), sps.Config())
    ran = trace.config["method"]
    assert (ran["draft"], ran["layers"], ran["gamma"]) == ("trained", "", best)
    prefix = sps.generate(real_lm, ids, Sampling(max_new_tokens=16), sps.Config(layers="0-3"))
    assert prefix.config["method"]["draft"] == "layers" and prefix.output_ids == trace.output_ids


def test_draft_cache_matches_a_fresh_prefill(tiny4) -> None:
    ids = tiny4.encode_prompt("The draft keeps its own cache")
    stepwise = sps.LayerDraft(tiny4, [0, 1], 0)
    stepwise.forward(ids[:-3])
    stepwise.forward(ids[-3:-1])
    stepwise.forward([999])
    stepwise.rollback(len(ids) - 1)  # drop the wrong token, then feed the right one
    got = stepwise.forward(ids[-1:])
    fresh = sps.LayerDraft(tiny4, [0, 1], 0).forward(ids)
    assert torch.allclose(got, fresh, atol=1e-9)
    assert stepwise.length == len(ids)


def test_full_depth_draft_accepts_everything(tiny4) -> None:
    ids = tiny4.encode_prompt("Hello there")
    trace = sps.generate(tiny4, ids, Sampling(max_new_tokens=21), sps.Config(gamma=4, layers="0-3", draft_vocab=0))
    assert trace.mean_accepted == pytest.approx(5.0)  # γ + 1: 4 forwards of 5 tokens each, then a final root


def test_tiny_sampling_records_every_decision(tiny4) -> None:
    ids = tiny4.encode_prompt("Hello there")
    s = Sampling(max_new_tokens=24, temperature=1.0, seed=5)
    trace = sps.generate(tiny4, ids, s, sps.Config(gamma=3, layers="0-1", draft_vocab=0))
    assert trace.output_ids == sps.generate(tiny4, ids, s, sps.Config(gamma=3, layers="0-1", draft_vocab=0)).output_ids
    rejected = 0
    for step in trace.steps[:-1]:
        d = step.detail
        for rec in d.records:
            assert rec["accepted"] == (rec["u"] < min(1.0, rec["ratio"]))
        if d.n_accepted < len(d.drafts):
            rejected += 1
            dists = d.records[-1]["dists"]
            assert len(dists["texts"]) == len(dists["tokens"])
            for pp, qq, rr in zip(dists["p"], dists["q"], dists["residual"], strict=True):
                assert rr >= 0 and (rr == 0 or pp > qq)
            assert trace.steps[step.index + 1].root_from == "residual"
    assert rejected > 0


def test_statistical_losslessness(tiny4) -> None:
    """Speculative sampling reproduces p (chi-square not rejected); the flawed rule is caught."""
    p, q = lossless.context_dists(tiny4, tiny4.encode_prompt("Pick a word"), 0.5, layers="0-1", draft="layers")
    good = lossless.run_rule("speculative", p, q, 40000, seed=11)
    bad = lossless.run_rule("flawed", p, q, 40000, seed=12)
    assert good["tv_exact"] < 1e-5  # float32 rounding of q
    assert good["p_value"] > 0.001
    assert bad["tv_exact"] > 0.05
    assert bad["p_value"] < 1e-6
