"""Lossless acceptance over a token tree: greedy matching at T = 0, tree speculative sampling at T > 0.

Tree nodes are the draft's deterministic top-k picks, so each sibling's proposal is a point mass q = δ_x.
Then min(1, p(x)/q(x)) = p(x) and the residual norm(max(p − δ_x, 0)) is p with x removed, renormalised.
Trying siblings one after another with that update is sequential sampling from p, so the token that
leaves each node is distributed exactly as p — whatever the draft proposed.
"""

from __future__ import annotations

from typing import Any

import torch

from specviz.acceptance import speculative_accept
from specviz.tree import TreeSpec, greedy_accept_path


def greedy_path(tokens: list[int], spec: TreeSpec, logits: torch.Tensor) -> list[int]:
    """Temperature 0: the longest root path whose tokens equal the target's argmax; logits [n, V]."""
    return greedy_accept_path(tokens, spec, logits.argmax(dim=-1).tolist())


def _uniform(gen: torch.Generator) -> float:
    return float(torch.rand(1, generator=gen, dtype=torch.float64))


def drop(p: torch.Tensor, x: int) -> torch.Tensor:
    """residual(p, δ_x) = norm(max(p − δ_x, 0)): p with x removed, renormalised (no [V] one-hot built)."""
    p = p.clone()
    p[x] = 0.0
    return p / p.sum()


def sample_node(p: torch.Tensor, kids: list[int], tokens: list[int], gen: torch.Generator,
                records: list[dict[str, Any]]) -> tuple[int | None, torch.Tensor]:
    """Recursive rejection over the children of one node; p [V] the target's distribution there.

    Returns (accepted child or None, the distribution left after the rejections).
    """
    p = p.double()
    for c in kids:
        x = tokens[c]
        p_x, u = float(p[x]), _uniform(gen)
        ok = speculative_accept(p_x, 1.0, u)  # q = δ_x, so the acceptance probability is p(x)
        records.append({"node": c, "token": x, "p": round(p_x, 6), "u": round(u, 6), "accepted": ok})
        if ok:
            return c, p
        p = drop(p, x)
    return None, p


def sample_path(tokens: list[int], spec: TreeSpec, probs: torch.Tensor,
                gen: torch.Generator) -> tuple[list[int], int | None, list[dict[str, Any]]]:
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
            return path, int(torch.multinomial(left, 1, generator=gen)), records
        path.append(child)
