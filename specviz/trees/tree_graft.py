"""Grafting n-gram candidates onto a draft tree, under the tree's node budget.

The candidates come from the text itself: each is what followed an earlier occurrence of the context's
last n tokens (the root included), longest n first, most recent first, as prompt lookup finds one; here
up to `count` different ones, each up to `length` tokens. A candidate is grafted only when it is longer
than the tree's deepest verified path: where it agrees with the tree it walks the tree's own nodes, the
rest becomes new nodes. To stay within the budget, the lowest-scored drafted leaves that no candidate
passes through give up their places. Each verified node remembers where it came from: the head, the
pool, or both.
"""

from __future__ import annotations

from specviz.core.drafting import suffix_matches
from specviz.trees.draft_tree import DraftTree

HEAD, POOL, BOTH = "head", "pool", "both"


def lookup_tails(seq: list[int], max_ngram: int, min_ngram: int, length: int, count: int) -> list[list[int]]:
    """Up to `count` distinct continuations (≤ `length` tokens) of the last n-gram of seq's earlier occurrences."""
    tails: list[list[int]] = []
    for _, start in suffix_matches(seq, max_ngram, min_ngram):  # longest n first, most recent first
        tail = seq[start : start + length]
        if tail and not any(t[: len(tail)] == tail for t in tails):
            tails.append(tail)
            if len(tails) == count:
                return tails
    return tails


def _children(tree: DraftTree, node: int) -> dict[int, int]:
    return {tree.tokens[c]: c for c in range(len(tree.tokens)) if tree.parents[c] == node}


def _deepest(tree: DraftTree) -> int:
    return max(d for d, k in zip(tree.depth, tree.kept, strict=True) if k)


def _evictable(tree: DraftTree, protected: set[int]) -> list[int]:
    """Kept drafted leaves no candidate uses, lowest score first."""
    parents = {tree.parents[i] for i in range(len(tree.tokens)) if tree.kept[i]}
    leaves = [i for i in range(1, len(tree.tokens)) if tree.kept[i] and i not in parents and i not in protected]
    return sorted(leaves, key=lambda i: (tree.score[i], -i))


def graft(tree: DraftTree, tails: list[list[int]], budget: int, sources: list[str]) -> list[str]:
    """Add the candidates longer than the tree's deepest kept path; keep at most `budget` nodes (root included).

    `sources` (one per drafted node, updated and extended in place, and returned) says who proposed each node.
    """
    protected: set[int] = set()
    for tail in tails:
        if len(tail) <= _deepest(tree):
            continue
        node, walked = 0, []
        for tok in tail:
            kid = _children(tree, node).get(tok)
            if kid is None or not tree.kept[kid]:
                if sum(tree.kept) >= budget and not _make_room(tree, protected | set(walked) | {node}):
                    break
                if kid is None:
                    kid = tree.add(node, tok, 0.0)
                    sources.append(POOL)
                tree.kept[kid] = True
            sources[kid] = BOTH if sources[kid] == HEAD else sources[kid]
            node = kid
            walked.append(kid)
        protected |= set(walked)
    return sources


def _make_room(tree: DraftTree, protected: set[int]) -> bool:
    """Drop the lowest-scored unprotected kept leaf; False when there is none."""
    leaves = _evictable(tree, protected)
    if not leaves:
        return False
    tree.kept[leaves[0]] = False
    return True
