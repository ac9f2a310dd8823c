"""Prompt lookup: n-gram matching, the adaptive draft length, greedy identity and lossless sampling."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specviz.core.sampling import ConfigError, Sampling
from specviz.methods import pld


def test_find_match_prefers_longest_then_most_recent() -> None:
    seq = [5, 6, 7, 1, 9, 6, 7, 2, 3, 6, 7]
    assert pld.find_match(seq, 3, 1) == (2, 7)  # "6 7" last seen at 5..6, continuation at 7
    assert pld.find_match([1, 2, 3, 9, 1, 2, 3], 3, 1) == (3, 3)
    assert pld.find_match([1, 2, 3, 4], 3, 1) == (0, -1)
    assert pld.find_match([4, 8, 4], 3, 2) == (0, -1)  # only a 1-gram repeats
    assert pld.find_match([4, 8, 4], 3, 1) == (1, 1)


# a measured-looking curve (fp32 stock kernels on a 2-core CPU): cost of m new tokens over 1, index m
CURVE = (0.0, 1.0, 1.4, 1.45, 1.35, 1.38, 1.4, 1.42, 1.44, 1.47, 1.5, 1.52, 1.54, 1.56, 1.58, 1.6, 1.62, 1.64)


def test_best_length_follows_acceptance_and_cost() -> None:
    cost = CURVE.__getitem__
    assert pld.best_length(0.05, 10, 10, cost) == 0  # a poor record: a plain step pays more
    assert pld.best_length(0.95, 10, 10, cost) == 10
    assert pld.best_length(0.95, 3, 10, cost) == 3  # never more than the copied span
    mid = pld.best_length(0.6, 10, 10, cost)
    assert 0 < mid < 10


def test_draft_length_reads_the_configs_curve_else_falls_back() -> None:
    from specviz.core.drafting import VerifyLatency

    cfg = pld.Config(max_draft=10)
    assert cfg.latency is None
    assert pld.draft_length(0.05, 8, cfg) == 8  # no curve: the fixed longest draft
    curve = VerifyLatency((1, 2, 4, 8, 16), (10.0, 14.0, 14.5, 14.4, 16.2))
    assert curve.relative(1) == 1.0 and curve.relative(3) == pytest.approx(1.425)
    measured = replace(cfg, latency=curve)
    assert pld.draft_length(0.05, 8, measured) == 0  # a poor record on a curve that charges for width
    assert pld.draft_length(0.95, 8, measured) == 8
    assert pld.draft_length(0.05, 8, pld.Config(adaptive=False, latency=curve)) == 8


def test_the_curve_is_plain_data_in_the_config_and_its_trace(tiny_lm) -> None:
    """A frozen Config determines the run: the curve it carries round-trips through a trace's record of it, and
    neither the command line nor the app's widgets take it as an option."""
    from specviz import methods
    from specviz.core.drafting import VerifyLatency

    cfg = pld.Config(latency=VerifyLatency((1, 2), (10.0, 30.0)))
    trace = pld.generate(tiny_lm, [1, 2, 3, 1, 2], Sampling(max_new_tokens=4), cfg)
    assert pld.Config(**trace.config["method"]) == cfg
    assert "latency" not in {f.name for f in methods.settings(pld.Config)}
    for bad in ({"latency": "1,2"}, {"latency": {"ks": [2], "ms": [1.0]}}):
        with pytest.raises(ConfigError):
            pld.Config(**bad)
    with pytest.raises(ConfigError):
        methods.make_config("pld", {"latency": "x"})


def test_evidence_decays_toward_prior() -> None:
    ev = pld.Evidence(pld.Config(prior=0.5, memory=0.5))
    ev.update(2, drafted=4, accepted=0)
    low = ev.rate(2)
    assert low < 0.5
    for _ in range(10):
        ev.update(1, drafted=0, accepted=0)
    assert low < ev.rate(2) < 0.5 + 1e-9


def test_config_is_validated() -> None:
    with pytest.raises(ConfigError):
        pld.Config(min_ngram=3, max_ngram=2)
    with pytest.raises(ConfigError):
        pld.Config(max_draft=0)


def test_tiny_sampling_is_seeded(tiny_lm) -> None:
    ids = tiny_lm.encode_prompt("Hello there")
    s = Sampling(max_new_tokens=20, temperature=0.8, seed=3)
    a, b = pld.generate(tiny_lm, ids, s), pld.generate(tiny_lm, ids, s)
    assert a.output_ids == b.output_ids


@pytest.mark.real_model
def test_real_sampling_copies_drafts_and_records_decisions(real_lm) -> None:
    ids = real_lm.encode_prompt("Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.")
    s = Sampling(max_new_tokens=24, temperature=0.7, seed=1)
    trace = pld.generate(real_lm, ids, s, pld.Config(adaptive=False, max_draft=4))
    drafted = [st for st in trace.steps if st.detail and st.detail.drafts]
    assert drafted, "a copying prompt should yield copied drafts"
    assert trace.mean_accepted > 1.2
    for st in drafted:
        assert all(r["q"] == 1.0 and 0 <= r["u"] < 1 for r in st.detail.records)
        assert st.detail.source in ("prompt", "output")
