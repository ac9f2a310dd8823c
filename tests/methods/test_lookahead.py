"""Lookahead: the mask layout cell by cell, the pool's rules, lossless verification, identity to `ar`."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specviz.core.model import crop_to
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.methods import ar
from specviz.methods import lookahead as la
from specviz.methods.base import settled
from specviz.trees.ngram_pool import Layout, NgramPool, additive_mask
from specviz.trees.walk import judge


def test_mask_layout_w2_n3_g1_cell_by_cell():
    lay = Layout(levels=2, width=2, cands=1, depth=2)  # [root][L0: 1 2][L1: 3 4][cand: 5 6]
    assert lay.size == 7
    assert lay.allowed() == [
        [1, 0, 0, 0, 0, 0, 0],  # root
        [1, 1, 0, 0, 0, 0, 0],  # L0[0]: root, itself
        [1, 1, 1, 0, 0, 0, 0],  # L0[1]: root, L0[0], itself
        [1, 1, 0, 1, 0, 0, 0],  # L1[0]: root, L0[0], itself
        [1, 1, 1, 0, 1, 0, 0],  # L1[1]: root, L0[0..1], itself
        [1, 0, 0, 0, 0, 1, 0],  # candidate token 0: root, itself
        [1, 0, 0, 0, 0, 1, 1],  # candidate token 1: root, candidate token 0, itself
    ]
    assert lay.positions(10) == [10, 11, 12, 12, 13, 11, 12]
    assert [s["label"] for s in lay.segments()] == ["root", "level 0", "level 1", "candidate 1"]


def test_mask_layout_w3_n4_g2_deepest_cells():
    lay = Layout(levels=3, width=3, cands=2, depth=3)
    assert lay.size == 1 + 9 + 6
    grid = lay.allowed()
    # L2[2] (slot 9) sees root, L0[0..2] (1, 2, 3), L1[2] (6) and itself
    assert [c for c, v in enumerate(grid[lay.slot(2, 2)]) if v] == [0, 1, 2, 3, 6, 9]
    # the second candidate's last token (slot 15) sees root and its own chain (13, 14)
    assert [c for c, v in enumerate(grid[lay.cand_slot(1, 2)]) if v] == [0, 13, 14, 15]
    assert lay.positions(0)[lay.slot(2, 2)] == 1 + 2 + 2 and lay.positions(0)[lay.cand_slot(1, 2)] == 3
    assert all(grid[r][c] == 0 for r in range(lay.size) for c in range(r + 1, lay.size))  # nothing sees ahead
    mask = additive_mask(lay, -1e30)
    assert mask.shape == (16, 16) and mask[0, 0] == 0 and mask[0, 1] == -1e30


def test_masked_forward_equals_sequential_forward(tiny_lm):
    """Each branch's logits under the combined mask equal a plain causal pass over its own chain."""
    lm, lay = tiny_lm, Layout(levels=2, width=3, cands=2, depth=2)
    prefix = lm.encode_prompt("Mask check")
    ids = torch.randint(100, 5000, (lay.size,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = lm.new_cache()
    lm.forward(prefix, cache)
    base = cache.get_seq_length()
    logits, _ = lm.forward(ids, cache, torch.tensor(lay.positions(base)), additive_mask(lay, lm.neg_inf()))
    for row, seen in ((lay.slot(1, 2), [0, 1, 2, 3, 6]), (lay.cand_slot(1, 1), [0, 9, 10])):
        crop_to(cache, base)
        ref, _ = lm.forward([ids[s] for s in seen], cache)
        assert torch.allclose(logits[row], ref[-1], atol=1e-9)


def test_pool_update_rules():
    pool = NgramPool(n=3, cap=2)
    assert pool.add([5, 1, 2]) == "new"
    assert pool.add([5, 3, 4]) == "new"
    assert pool.candidates(5, 9) == [[3, 4], [1, 2]]  # most recent first
    assert pool.add([5, 1, 2]) == "refreshed"  # seen again: moves to the back
    assert pool.candidates(5, 9) == [[1, 2], [3, 4]]
    pool.hit(5, [3, 4])
    assert pool.add([5, 7, 8]) == "evicted"  # the key is full: its least recent n-gram goes, hits too
    assert pool.candidates(5, 9) == [[7, 8], [1, 2]] and (5, 3, 4) not in pool.hits
    assert pool.candidates(5, 1) == [[7, 8]] and pool.candidates(6, 3) == []
    assert len(pool) == 2
    with pytest.raises(ValueError):
        pool.add([1, 2])


def test_pool_seed_and_top():
    pool = NgramPool(n=2, cap=3)
    assert pool.seed([1, 2, 1, 3, 1, 2]) == 5
    assert pool.candidates(1, 3) == [[2], [3]]
    pool.hit(1, [2])
    top = pool.top(1, str)
    assert top == [
        {
            "key": 1,
            "text": "1",
            "grams": [{"tail": [2], "texts": ["2"], "hits": 1}, {"tail": [3], "texts": ["3"], "hits": 0}],
        }
    ]


def _onehot_logits(tokens: list[int], vocab: int = 6) -> torch.Tensor:
    out = torch.full((len(tokens), vocab), -10.0)
    out[torch.arange(len(tokens)), torch.tensor(tokens)] = 10.0
    return out


def test_greedy_verify_longest_match():
    root = _onehot_logits([4])[0]
    cands = [[4, 1, 0], [4, 2, 5], [3, 2, 5]]
    rows = [_onehot_logits([2, 5, 1])] * 3  # after 4 the target says 2, then 5 (the same on every branch)
    v = judge(root, cands, rows, Sampling(), torch.Generator())
    assert v.matched == [1, 3, 0] and v.best == 1 and v.accepted == [4, 2, 5] and v.forced is None
    none = judge(root, [[3, 2, 5]], rows[2:], Sampling(), torch.Generator())
    assert none.best == -1 and none.accepted == []


def test_sampling_verify_is_lossless():
    """At T=1 the first token follows p(root) and the second p(. | first), whatever the candidates are."""
    torch.manual_seed(0)
    root = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1]))
    after0 = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.4]))
    cands = [[0, 1], [1, 3], [0, 3]]
    rows = [torch.stack([after0, after0]), torch.stack([after0, after0]), torch.stack([after0, after0])]
    gen, s, n = torch.Generator().manual_seed(1), Sampling(temperature=1.0), 20000
    first, second = Counter(), Counter()
    for _ in range(n):
        v = judge(root, cands, rows, s, gen)
        seq = [*v.accepted, v.forced] if v.forced is not None else v.accepted
        first[seq[0]] += 1
        if seq[0] == 0:
            second[seq[1]] += 1
    for tok, p in enumerate([0.4, 0.3, 0.2, 0.1]):
        assert abs(first[tok] / n - p) < 0.015
    total = sum(second.values())
    for tok, p in enumerate([0.1, 0.2, 0.3, 0.4]):
        assert abs(second[tok] / total - p) < 0.02


CONFIGS = [
    la.Config(),
    la.Config(window=2, ngram=2, guesses=1, init="pad"),
    la.Config(window=5, ngram=4, guesses=5, init="random"),
    la.Config(guesses=0, seed_prompt=False),
    la.Config(window_vocab=8192),
]


@pytest.mark.parametrize("cfg", CONFIGS[:3])
def test_identity_when_pooled_ngrams_are_accepted(tiny_lm, cfg):
    """A pool seeded with the true continuation (plus noise) must be accepted, and change nothing."""
    cfg = settled(cfg)  # W, N, G left for the fit take their fallback
    ids, s = tiny_lm.encode_prompt("Hello there"), Sampling(max_new_tokens=24)
    want = ar.generate(tiny_lm, ids, s).output_ids
    pool = NgramPool(cfg.ngram, max(1, cfg.guesses))
    pool.seed(want[::-1])  # noise: the same tokens in the wrong order
    pool.seed(want)
    trace = la.finish(*la.start(tiny_lm, ids, s, cfg, pool=pool))
    assert trace.output_ids == want
    assert trace.mean_accepted > 1.4
    assert Trace.from_json(trace.to_json()) == trace


def test_trace_detail_and_round_trip(tiny_lm):
    cfg = la.Config(window=3, ngram=3, guesses=2)
    trace = la.generate(tiny_lm, tiny_lm.encode_prompt("Count to five"), Sampling(max_new_tokens=10), cfg)
    d = trace.steps[2].detail
    assert len(d.window) == 2 and all(len(lv) == 3 for lv in d.window)  # full after one step
    assert len(d.harvested) == 3 and all(len(g) == 3 for g in d.harvested)
    assert len(d.matched) == len(d.candidates) == d.layout["cands"]
    assert trace.steps[2].forward_tokens == Layout(**d.layout).size
    assert trace.drafted_steps[-1].detail.pool_top
    assert Trace.from_json(trace.to_json()) == trace


def test_sampling_is_seeded(tiny_lm):
    ids, cfg = tiny_lm.encode_prompt("Hello there"), la.Config()
    s = Sampling(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=7)
    a, b = la.generate(tiny_lm, ids, s, cfg), la.generate(tiny_lm, ids, s, cfg)
    c = la.generate(tiny_lm, ids, Sampling(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=8), cfg)
    assert a.output_ids == b.output_ids != c.output_ids


@pytest.mark.parametrize(
    "bad", [{"window": -1}, {"ngram": 1}, {"guesses": -2}, {"init": "zeros"}, {"window_vocab": -5}]
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        la.Config(**bad)
