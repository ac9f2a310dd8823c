"""Medusa + Lookahead's own pieces: the pool's n-grams grafted onto the heads' tree, the window laid beside the tree
in one forward (neither sees the other), the record of who proposed each node, and the tree figure ringing the pool's
nodes. (Its identity with plain decoding and its sampling are the contract's and
tests/methods/test_generate_lossless.py's.)"""

from __future__ import annotations

from specviz.core.details import MedusaLookaheadDetail
from specviz.core.sampling import Sampling
from specviz.methods import medusa_lookahead
from specviz.methods.medusa_lookahead import BOTH, HEAD, POOL, graft, layout
from specviz.trees.head_tree import HeadsDraft
from specviz.trees.ngram_pool import Layout
from specviz.trees.tree import TreeSpec


def heads_tree() -> HeadsDraft:
    """Root 7; head 1's ranks 0 and 1 (tokens 10, 11); head 2's rank 0 under 10 (token 20)."""
    spec = TreeSpec.from_paths([(0,), (1,), (0, 0)])
    return HeadsDraft([7, 10, 11, 20], [0.6, 0.2, 0.5], spec)


def test_a_pooled_ngram_walks_the_heads_nodes_where_it_agrees_and_grows_its_own_after():
    tokens, spec, head_p, sources = graft(heads_tree(), [[10, 21], [12, 13]])
    assert tokens == [7, 10, 11, 20, 21, 12, 13]
    assert spec.parents == [-1, 0, 0, 1, 1, 0, 5]  # 21 hangs under the heads' 10; 12 -> 13 a branch of its own
    assert sources == ["root", BOTH, HEAD, HEAD, POOL, POOL, POOL]
    assert head_p == [0.6, 0.2, 0.5, None, None, None]  # the pool's nodes have no head probability
    assert spec.ranks[4:] == [(), (), ()] and spec.ranks[1] == (0,)


def test_the_window_sees_the_root_and_its_columns_and_the_tree_never_sees_the_window():
    spec = TreeSpec.from_paths([(0,), (1,), (0, 0)])  # 4 tree nodes
    lay = Layout(2, 2, 0, 2)  # two levels of a 2-wide window
    positions, seen = layout(spec, lay, prefix=100)
    n, window = len(spec), list(range(len(spec), len(spec) + 4))
    assert positions == [100, 101, 101, 102, 101, 102, 102, 103]  # the window's level l, column i at 1 + i + l
    assert not seen[:n, n:].any()  # no tree node sees the window
    assert seen[window, 0].all() and not seen[window][:, 1:n].any()  # the window sees the root, no other tree node
    assert seen[:n, :n].equal(spec.ancestry())


def test_a_run_records_who_proposed_each_node_and_the_tree_rings_the_pools(sticky, sticky_prompt):
    """On the sticky model, whose runs the pool (seeded with a prompt holding its own answer) can continue and whose
    untrained heads guess at random, the pool's branches join the trees and are ringed in the figure."""
    from specviz.output.viz.tree import busiest_tree

    kw = medusa_lookahead.tiny_resources(sticky)
    trace = medusa_lookahead.generate(sticky, sticky_prompt, Sampling(max_new_tokens=24), **kw)
    details = [d for _s, d in trace.detailed(MedusaLookaheadDetail)]
    assert details and all(d.problem() is None for d in details)
    assert all(len(d.sources) == len(d.nodes) and d.sources[0] == "root" for d in details)
    assert all(len(d.window) in (1, 2) for d in details)  # N = 3: up to two levels fed beside the tree
    assert any(POOL in d.sources for d in details)  # the pool's branches joined the heads' trees
    best = max(trace.detailed(MedusaLookaheadDetail), key=lambda sd: (sd[0].accepted, -sd[0].index))[1]
    rings = [t for t in busiest_tree(trace).data if t.name == "from the n-gram pool"]
    assert POOL in best.sources and [len(t.x) for t in rings] == [best.sources.count(POOL)]


def test_its_config_bounds_the_window():
    import pytest

    from specviz.core.sampling import ConfigError

    for bad in ({"window": 0}, {"ngram": 1}, {"guesses": 17}, {"init": "nope"}):
        with pytest.raises(ConfigError):
            medusa_lookahead.Config(**bad)
    cfg = medusa_lookahead.Config(heads=2, total_tokens=5, window=2, ngram=3, guesses=1)
    assert cfg.forward_tokens == 5 + 2 * 1 + 2 * 2
