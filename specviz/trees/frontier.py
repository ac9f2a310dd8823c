"""EAGLE-2's growth rule on a drafted tree, for one row or each row of a batch: which nodes a round expands, and
which drafted nodes a node sees (its ancestors; the root's pair is part of the committed prefix)."""

from __future__ import annotations

from specviz.trees.draft_tree import DraftTree


def frontier(tree: DraftTree, layer: list[int], k: int) -> list[int]:
    """The k nodes of the newest layer with the highest cumulative log-prob (ties: the earlier), in index order."""
    return sorted(sorted(layer, key=lambda i: (-tree.score[i], i))[:k])


def ancestors(tree: DraftTree, node: int) -> list[int]:
    """The node's drafted ancestors, nearest first (the root excluded)."""
    out, a = [], tree.parents[node]
    while a > 0:
        out.append(a)
        a = tree.parents[a]
    return out
