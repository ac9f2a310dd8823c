"""Every node's fate in a verified token tree, and why: the acceptance walks with their reasons, as plain records.

Each walk returns (accepted node path from the root, the next root when the rule already drew it, the reason
each judged node was rejected); `node_records` then labels every node accepted, rejected, passed or unreached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specviz.core.acceptance import typical_threshold
from specviz.trees.tree import TreeSpec, greedy_accept_path, longest_path
from specviz.trees.tree_sampling import sample_path

Walk = tuple[list[int], int | None, dict[int, str]]  # (path, next root or None, node -> why it was rejected)


def greedy_walk(tokens: list[int], spec: TreeSpec, logits: torch.Tensor, text: Callable[[int], str]) -> Walk:
    """T = 0: the longest path matching the target's argmax (logits [n, V]); a child off it is not what was chosen."""
    choice = logits.argmax(-1).tolist()
    path = greedy_accept_path(tokens, spec, choice)
    why = {c: f"target chose {text(choice[j])!r}" for j in path for c in spec.children(j) if c not in path}
    return path, None, why


def sampled_walk(tokens: list[int], spec: TreeSpec, probs: torch.Tensor, gen: torch.Generator) -> Walk:
    """T > 0, lossless: tree speculative sampling down the tree (probs [n, V]); a rejected child lost its draw."""
    path, nxt, records = sample_path(tokens, spec, probs, gen)
    why = {r["node"]: f"rejected: u={r['u']:.3f} ≥ p={r['p']:.3f}" for r in records if not r["accepted"]}
    return path, nxt, why


def typical_walk(tokens: list[int], spec: TreeSpec, probs: torch.Tensor, eps: float, delta: float) -> Walk:
    """Typical acceptance: the longest path whose every token beats min(eps, delta·exp(-H)) of its parent's p."""
    thresholds: dict[int, float] = {}
    why: dict[int, str] = {}

    def ok(c: int) -> bool:
        parent = spec.parents[c]
        if parent not in thresholds:
            thresholds[parent] = typical_threshold(probs[parent], eps, delta)
        p_x = float(probs[parent, tokens[c]])
        if p_x > thresholds[parent]:
            return True
        why[c] = f"p={p_x:.3f} ≤ threshold {thresholds[parent]:.3f}"
        return False

    return longest_path(spec, ok), None, why


def _fate(j: int, parent: int, on_path: set[int], why: dict[int, str]) -> tuple[str, str]:
    """(status, reason) of node j."""
    if j in on_path:
        return "accepted", "root: the target's own token" if j == 0 else "accepted"
    if j in why:
        return "rejected", why[j]
    if parent in on_path:
        return "passed", "passed, but a longer branch was committed"
    return "unreached", "its parent was not accepted"


def node_records(
    spec: TreeSpec,
    tokens: list[int],
    head_p: list[float],
    probs: torch.Tensor,
    path: list[int],
    why: dict[int, str],
    text: Callable[[int], str],
) -> list[dict[str, Any]]:
    """Plain data per node: token, head, rank, probabilities, status and the reason for a rejection."""
    on_path = set(path)
    out = []
    for j, tok in enumerate(tokens):
        parent = spec.parents[j]
        status, reason = _fate(j, parent, on_path, why)
        out.append(
            {
                "token": tok,
                "text": text(tok),
                "head": spec.depths[j],
                "rank": spec.ranks[j][-1] if j else None,
                "head_prob": head_p[j - 1] if j else None,
                "target_prob": round(float(probs[parent, tok]), 6) if j else None,
                "status": status,
                "reason": reason,
            }
        )
    return out
