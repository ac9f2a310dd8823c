"""Each acceptance rule on small hand-made distributions."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import chisquare

from specviz.core.acceptance import (
    flawed_accept,
    flawed_residual,
    greedy_match,
    residual,
    speculative_accept,
    typical_threshold,
)
from specviz.core.sampling import Sampling
from specviz.trees.tree import TreeSpec
from specviz.trees.walk import Rule, Walk, chain_records, walk

P = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
Q = torch.tensor([0.2, 0.5, 0.1, 0.2], dtype=torch.float64)


def test_greedy_match_counts_the_common_prefix() -> None:
    assert greedy_match([1, 2, 3], [1, 2, 4]) == 2
    assert greedy_match([5], [6]) == 0
    assert greedy_match([1, 2], [1, 2, 3]) == 2
    assert greedy_match([], [1]) == 0


def test_typical_threshold_is_min_of_eps_and_entropy_term() -> None:
    uniform = torch.full((4,), 0.25)
    assert typical_threshold(uniform, eps=0.09, delta=0.3) == pytest.approx(0.3 * 0.25)
    assert typical_threshold(uniform, eps=0.05, delta=0.3) == pytest.approx(0.05)
    peaked = torch.tensor([1.0, 0.0, 0.0, 0.0])  # H = 0, so delta * e^0 = delta
    assert typical_threshold(peaked, eps=0.9, delta=0.3) == pytest.approx(0.3)


def test_speculative_accept_uses_min_one_ratio() -> None:
    assert speculative_accept(0.2, 0.4, 0.49)
    assert not speculative_accept(0.2, 0.4, 0.51)
    assert speculative_accept(0.6, 0.3, 0.999)  # p >= q always accepts
    assert not speculative_accept(0.0, 0.3, 0.0)


def test_residual_keeps_only_where_p_exceeds_q() -> None:
    r = residual(P, Q)
    expected = torch.tensor([0.3, 0.0, 0.05, 0.0], dtype=torch.float64) / 0.35
    assert torch.allclose(r, expected)
    assert torch.allclose(residual(P, P), P)  # no mass left: falls back to p


def test_speculative_rule_is_exact_in_expectation() -> None:
    # P(out = y) = q(y) min(1, p/q) + (1 - sum_x q(x) min(1, p/q)) residual(y) must equal p(y)
    accept = Q * torch.clamp(P / Q, max=1)
    out = accept + (1 - accept.sum()) * residual(P, Q)
    assert torch.allclose(out, P)


def test_flawed_rule_is_biased_in_expectation() -> None:
    accept = Q * (P / P.max())
    out = accept + (1 - accept.sum()) * flawed_residual(P, 0.0)
    assert not torch.allclose(out, P, atol=0.02)
    assert flawed_accept(0.3, 0.5, 0.59) and not flawed_accept(0.3, 0.5, 0.61)
    assert torch.allclose(flawed_residual(P, 0.3), P)  # norm(p - p(x)·p) is p itself


def chain_walk(p: torch.Tensor, q: torch.Tensor, drafts: list[int], gen: torch.Generator, rule: Rule) -> Walk:
    """A chain drafted from q [k, V] judged by the one acceptance walk against p [k + 1, V], at T = 1."""
    tokens = [0, *drafts]  # the root's token is never judged
    return walk(Sampling(temperature=1.0), gen, tokens, TreeSpec.chain(len(tokens)), p, p, str, rule, q)


def _first_tokens(rule: Rule, n: int) -> torch.Tensor:
    """Empirical counts of the first committed token after one draft x ~ Q."""
    gen = torch.Generator().manual_seed(123)
    p = torch.stack([P, torch.tensor([0.25] * 4, dtype=torch.float64)])
    counts = torch.zeros(4)
    for _ in range(n):
        x = int(torch.multinomial(Q, 1, generator=gen))
        w = chain_walk(p, Q[None], [x], gen, rule)
        counts[x if len(w.path) > 1 else w.next_root] += 1
    return counts


def test_the_walk_judges_a_sampled_chain_exactly_and_the_flawed_rule_does_not() -> None:
    n = 4000
    good = _first_tokens(Rule("exact"), n)
    assert chisquare(good.numpy(), (P * n).numpy()).pvalue > 0.01
    bad = _first_tokens(Rule("flawed"), n)
    assert chisquare(bad.numpy(), (P * n).numpy()).pvalue < 1e-6


def test_chain_records_hold_the_decision_and_rejection_dists() -> None:
    p = torch.stack([P, P, P])
    q = torch.stack([Q, Q])
    rejected = 0
    for seed in range(12):  # each draft is kept with probability 0.6: some seeds reject (P(none) < 1e-4)
        w = chain_walk(p, q, [1, 1], torch.Generator().manual_seed(seed), Rule("exact"))
        acc, recs = len(w.path) - 1, chain_records(w, [1, 1], p, "speculative", str, q)
        assert len(recs) == acc + (acc < 2)
        for rec in recs:
            assert rec["ratio"] == pytest.approx(0.6) and rec["q"] == pytest.approx(0.5)
            assert rec["accepted"] == (rec["u"] < 0.6)
        if acc == 2:
            assert w.next_root is None  # the bonus comes from the last node's p, drawn by the run
            continue
        rejected += 1
        dists = recs[-1]["dists"]
        assert dists["residual"][dists["tokens"].index(1)] == 0.0
        assert math.isclose(sum(dists["residual"]), 1.0, abs_tol=1e-5)
        assert w.next_root in (0, 2)  # residual mass only where p > q
    assert rejected > 0


def test_typical_acceptance_stops_a_chain_at_an_improbable_token() -> None:
    p = torch.stack([P, P, P])
    w = chain_walk(p, torch.stack([Q, Q]), [0, 3], torch.Generator().manual_seed(0), Rule("typical", 0.09, 0.3))
    recs = chain_records(w, [0, 3], p, "typical", str, torch.stack([Q, Q]), eps=0.09, delta=0.3)
    assert len(w.path) == 2 and recs[0]["accepted"] and not recs[1]["accepted"]
    assert recs[1]["threshold"] == pytest.approx(0.09) and recs[1]["dists"]["residual"][0] == pytest.approx(0.5)


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown rule"):
        Rule("nope")
