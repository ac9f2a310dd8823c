"""EAGLE-2 + n-gram pool: the lookup, the graft under the budget, and losslessness through the real generate."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from dataclasses import replace

import pytest
import torch
from scipy.stats import chisquare

from specviz.details import HybridStep
from specviz.draft_tree import DraftTree
from specviz.methods import autoregressive as ar
from specviz.methods import hybrid
from specviz.model import Resources
from specviz.sampling import Sampling, target_probs
from specviz.tree_graft import BOTH, HEAD, POOL, graft, lookup_tails
from specviz.viz.eagle import POOL_MARK, verify_figures


def test_lookup_finds_distinct_continuations_longest_match_first():
    seq = [1, 2, 3, 9, 1, 2, 4, 7, 5, 1, 2]
    assert lookup_tails(seq, 3, 1, 3, 4) == [[4, 7, 5], [3, 9, 1]]  # after "1 2", most recent first
    assert lookup_tails(seq, 3, 1, 2, 1) == [[4, 7]]
    assert lookup_tails([5, 6, 7], 3, 1, 4, 2) == []


def small_tree() -> DraftTree:
    """root 0 → a(10) → b(11), root → c(12), scores -0.5, -1.0, -2.0; all kept."""
    tree = DraftTree(tokens=[0])
    a = tree.add(0, 10, -0.5)
    tree.add(a, 11, -0.5)
    tree.add(0, 12, -2.0)
    tree.kept = [True] * 4
    return tree


def kept_is_a_tree(tree: DraftTree) -> bool:
    return all(tree.kept[tree.parents[i]] for i in range(1, len(tree.tokens)) if tree.kept[i])


def test_graft_walks_the_tree_adds_the_rest_and_keeps_the_budget():
    tree = small_tree()
    sources = graft(tree, [[10, 11, 13, 14]], budget=6, sources=[HEAD] * 4)
    assert sum(tree.kept) == 6 and kept_is_a_tree(tree)
    assert tree.tokens[4:] == [13, 14] and tree.parents[4:] == [2, 4]
    assert sources == [HEAD, BOTH, BOTH, HEAD, POOL, POOL]

    tree = small_tree()  # budget 5: the weakest head leaf (token 12) gives up its place
    graft(tree, [[10, 11, 13, 14]], budget=5, sources=[HEAD] * 4)
    assert sum(tree.kept) == 5 and not tree.kept[3] and kept_is_a_tree(tree)

    tree = small_tree()  # a candidate no longer than the tree's deepest path is not grafted
    assert graft(tree, [[12, 15]], budget=8, sources=[HEAD] * 4) == [HEAD] * 4 and len(tree.tokens) == 4


def test_graft_cuts_a_candidate_when_nothing_can_leave():
    tree = small_tree()
    graft(tree, [[10, 11, 13, 14, 15, 16]], budget=5, sources=[HEAD] * 4)
    assert sum(tree.kept) == 5 and kept_is_a_tree(tree)
    children = {}
    for i in range(1, len(tree.tokens)):
        children.setdefault(tree.parents[i], []).append(tree.tokens[i])
    assert all(len(v) == len(set(v)) for v in children.values())  # siblings stay distinct (point masses)


def test_grafted_nodes_are_verified_and_carry_the_copy(tiny_lm, monkeypatch):
    """A pool that knows plain decoding's continuation (the lookup patched to return it): its nodes join the
    tree, are verified in the same forward and accepted, and the output is still plain decoding's."""
    ids = tiny_lm.encode_prompt("Tell me about rivers")
    s = Sampling(max_new_tokens=24)
    plain = ar.generate(tiny_lm, ids, s).output_ids
    kw = hybrid.tiny_resources(tiny_lm)

    def oracle(seq, max_ngram, min_ngram, length, count):
        done = len(seq) - len(ids)  # tokens committed so far, the root included
        return [plain[done : done + length]] if plain[done - 1 : done] == seq[-1:] else []

    monkeypatch.setattr(hybrid, "lookup_tails", oracle)
    t = hybrid.generate(tiny_lm, ids, s, **kw)
    assert t.output_ids == plain
    steps = [d for _, d in t.detailed(HybridStep)]
    assert all(len(d.sources) == len(d.tree["tokens"]) for d in steps)
    assert all(sum(d.tree["kept"]) <= kw["config"].total_tokens for d in steps)
    on_path = [d.sources[n] for d in steps for n in d.path[1:]]
    assert on_path and on_path.count("head") < len(on_path)  # the pool's nodes were accepted
    assert t.mean_accepted > 3  # an untrained head alone accepts about nothing
    step = next(st for st, d in t.detailed(HybridStep) if "pool" in d.sources)
    _, mask = verify_figures(step)  # the mask marks the pool's nodes
    assert any(POOL_MARK in str(tick) for tick in mask.layout.yaxis.ticktext or mask.data[0].y)


@pytest.fixture(scope="module")
def peaked(tiny_lm):
    """The tiny model with its output layer scaled 4×: a few likely tokens, so a chi-square test has power."""
    hf = copy.deepcopy(tiny_lm.hf)
    with torch.no_grad():
        hf.get_output_embeddings().weight.mul_(4.0)
    return replace(tiny_lm, hf=hf, lock=threading.Lock(), resources=Resources())


@pytest.mark.full
def test_sampling_through_generate_keeps_the_target_distribution(peaked):
    """T = 0.8: the token after the first, drawn through the tree (head, pool or residual), is distributed as p."""
    ids = peaked.encode_prompt("one two three one two three one two")
    kw = hybrid.tiny_resources(peaked)
    runs = [
        hybrid.generate(peaked, ids, Sampling(max_new_tokens=2, temperature=0.8, seed=i), **kw) for i in range(1500)
    ]
    first = Counter(t.output_ids[0] for t in runs).most_common(1)[0][0]
    second = [t.output_ids[1] for t in runs if t.output_ids[0] == first]
    with torch.no_grad():
        logits = peaked.hf(torch.tensor([[*ids, first]])).logits[0, -1]
    p = target_probs(logits, Sampling(temperature=0.8)).double()
    top = p.argsort(descending=True)[:6].tolist()
    observed = [sum(x == k for x in second) for k in top] + [sum(x not in top for x in second)]
    expected = [float(p[k]) * len(second) for k in top] + [float(1 - p[top].sum()) * len(second)]
    assert len(second) > 300 and chisquare(observed, expected).pvalue > 1e-3
    biased = observed[:]
    biased[0] += len(second) // 10  # the same test catches a sampler that favours one draft by 10%
    assert chisquare(biased, [e * sum(biased) / sum(expected) for e in expected]).pvalue < 1e-3
