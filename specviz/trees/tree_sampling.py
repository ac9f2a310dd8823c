"""Lossless acceptance over a token tree: greedy matching at T = 0, tree speculative sampling at T > 0.

Tree nodes are the draft's deterministic top-k picks, so each sibling's proposal is a point mass q = δ_x.
Then min(1, p(x)/q(x)) = p(x) and the residual norm(max(p − δ_x, 0)) is p with x removed, renormalised.
Trying siblings one after another with that update is sequential sampling from p, so the token that
leaves each node is distributed exactly as p — whatever the draft proposed.
"""

from __future__ import annotations

from typing import Any

import torch

from specviz.core.acceptance import draw, drop, point_mass_accept
from specviz.trees.tree import TreeSpec, greedy_accept_path

__all__ = ["drop", "greedy_path", "sample_node", "sample_path"]


def greedy_path(tokens: list[int], spec: TreeSpec, logits: torch.Tensor) -> list[int]:
    """Temperature 0: the longest root path whose tokens equal the target's argmax; logits [n, V]."""
    return greedy_accept_path(tokens, spec, logits.argmax(dim=-1).tolist())


def sample_node(
    p: torch.Tensor, kids: list[int], tokens: list[int], gen: torch.Generator, records: list[dict[str, Any]]
) -> tuple[int | None, torch.Tensor]:
    """Recursive rejection over the children of one node; p [V] the target's distribution there.

    Returns (accepted child or None, the distribution left after the rejections).
    """
    p = p.double()
    for c in kids:
        ok, p_x, u = point_mass_accept(p, tokens[c], gen)
        records.append({"node": c, "token": tokens[c], "p": round(p_x, 6), "u": round(u, 6), "accepted": ok})
        if ok:
            return c, p
        p = drop(p, tokens[c])
    return None, p


def sample_path(
    tokens: list[int], spec: TreeSpec, probs: torch.Tensor, gen: torch.Generator
) -> tuple[list[int], int | None, list[dict[str, Any]]]:
    """Temperature > 0: walk down the tree by tree speculative sampling; probs [n, V] target distributions.

    Returns (accepted node path from the root, the token drawn from the residual where every child was
    rejected — None when the walk ended at a leaf, so the bonus comes from that leaf's p —, decisions).
    """
    path, records = [0], []
    while True:
        kids = spec.children(path[-1])
        if not kids:
            return path, None, records
        child, left = sample_node(probs[path[-1]], kids, tokens, gen, records)
        if child is None:
            return path, draw(left, gen), records
        path.append(child)
