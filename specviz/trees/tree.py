"""The candidate tree as data: parents → depths, mask, positions, paths; the sparse tree; tree verification.

Node 0 is the root: the pending token the target itself chose. A rank path such as (0, 1) means
"rank 0 of head 1, then rank 1 of head 2" (0-based ranks, as in the Medusa reference's medusa_choices).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from specviz.core.kv_cache import first_moved
from specviz.core.model import crop_to


@dataclass(frozen=True)
class TreeSpec:
    """A token tree: node i hangs under parents[i]; node 0 is the root (parents[0] == -1)."""

    parents: list[int]
    # rank path of each node when built from Medusa rank paths (root = ()); empty otherwise
    ranks: list[tuple[int, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        p = list(self.parents)
        if not p or p[0] != -1:
            raise ValueError("A tree needs a root: parents[0] must be -1.")
        for i, q in enumerate(p[1:], start=1):
            if not 0 <= q < i:
                raise ValueError(f"parents[{i}] = {q}; every parent must come before its child.")
        if self.ranks and len(self.ranks) != len(p):
            raise ValueError("ranks must give one rank path per node.")
        object.__setattr__(self, "parents", p)

    def __len__(self) -> int:
        return len(self.parents)

    @cached_property
    def depths(self) -> list[int]:
        """Depth of each node; the root has depth 0."""
        d = [0] * len(self.parents)
        for i in range(1, len(d)):
            d[i] = d[self.parents[i]] + 1
        return d

    @cached_property
    def _children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in self.parents]
        for i, q in enumerate(self.parents[1:], start=1):
            kids[q].append(i)
        return kids

    def children(self, i: int) -> list[int]:
        """Direct children of node i, in index order."""
        return list(self._children[i])

    def path_to(self, i: int) -> list[int]:
        """Node indices from the root down to node i."""
        out = [i]
        while self.parents[out[-1]] >= 0:
            out.append(self.parents[out[-1]])
        return out[::-1]

    def leaves(self) -> list[int]:
        """Nodes without children, in index order."""
        return [i for i, kids in enumerate(self._children) if not kids]

    def retrieve_indices(self) -> list[list[int]]:
        """One root-to-leaf path of node indices per leaf."""
        return [self.path_to(leaf) for leaf in self.leaves()]

    def ancestry(self) -> torch.Tensor:
        """Boolean [n, n]: entry (i, j) is True when j is i itself or one of its ancestors."""
        n = len(self.parents)
        see = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            see[i, self.path_to(i)] = True
        return see

    def mask(self, neg_inf: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Additive mask [n, n] over the tree nodes: 0 where node i may see node j, neg_inf elsewhere."""
        n = len(self.parents)
        return torch.zeros(n, n, dtype=dtype).masked_fill_(~self.ancestry(), neg_inf)

    def positions(self, prefix_len: int) -> torch.Tensor:
        """Position ids [n]: prefix length + depth, so siblings share a position."""
        return torch.tensor(self.depths, dtype=torch.long) + prefix_len

    def is_chain(self) -> bool:
        """Whether every node's parent is the node before it."""
        return all(q == i - 1 for i, q in enumerate(self.parents))

    @classmethod
    def chain(cls, n: int) -> TreeSpec:
        """A plain sequence of n nodes."""
        return cls(parents=list(range(-1, n - 1)))

    @classmethod
    def from_paths(cls, paths: Sequence[tuple[int, ...]]) -> TreeSpec:
        """Medusa rank paths → nodes sorted by depth (then by rank path); the root is implicit."""
        uniq = sorted({tuple(p) for p in paths if len(p) > 0}, key=lambda p: (len(p), p))
        index: dict[tuple[int, ...], int] = {(): 0}
        parents = [-1]
        for p in uniq:
            if p[:-1] not in index:
                raise ValueError(f"Rank path {p} has no parent {p[:-1]} in the tree.")
            index[p] = len(parents)
            parents.append(index[p[:-1]])
        return cls(parents=parents, ranks=[(), *uniq])


def hang(tokens: list[int], parents: list[int], child: dict[tuple[int, int], int], branch: Sequence[int]) -> list[int]:
    """Hang `branch` from the root of a tree kept as `tokens` and `parents` (extended in place), walking the nodes it
    agrees with (`child`: (parent, token) -> node, kept up to date): the node of each of its tokens, in order; the
    nodes it added are appended at the end, in that order."""
    node, path = 0, []
    for tok in branch:
        if (node, tok) not in child:
            child[(node, tok)] = len(tokens)
            tokens.append(tok)
            parents.append(node)
        node = child[(node, tok)]
        path.append(node)
    return path


def verify_tree(
    lm, cache, tokens: list[int], spec: TreeSpec, logits_for: slice | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score every node in ONE target forward; return (logits [n, V] float32, hidden [n, H])."""
    if len(tokens) != len(spec):
        raise ValueError(f"{len(tokens)} tokens for a tree of {len(spec)} nodes.")
    prefix = cache.get_seq_length()
    mask = None if spec.is_chain() else spec.mask(lm.neg_inf(), lm.dtype)
    return lm.forward(tokens, cache, positions=spec.positions(prefix), mask=mask, logits_for=logits_for)


def verify_tree_layers(
    lm, cache, tokens: list[int], spec: TreeSpec, layers: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verify_tree, also returning each node's inputs of `layers`: (logits [n, V], hidden [n, H], inputs [n, 3H])."""
    if len(tokens) != len(spec):
        raise ValueError(f"{len(tokens)} tokens for a tree of {len(spec)} nodes.")
    prefix = cache.get_seq_length()
    mask = None if spec.is_chain() else spec.mask(lm.neg_inf(), lm.dtype)
    return lm.forward_layers(tokens, cache, layers, positions=spec.positions(prefix), mask=mask)


@torch.inference_mode()
def commit_path(cache, prefix_len: int, path: list[int]) -> None:
    """Keep the prefix plus the accepted path's keys/values, packed contiguously; drop the rest.

    `path` lists slots after the prefix (0 = the root). The path's few slots are copied in place and
    the tail cropped, instead of rebuilding every layer's whole cache (an O(context) copy) each step. Only the
    slots from the first one out of place are moved, and their index is built once, not once per layer.
    """
    path = list(path)
    if hasattr(cache, "keep_path"):  # core.lean's KV: one gather over every layer
        cache.keep_path(prefix_len, path)
        return
    first = first_moved(path)  # path[:first] already sits in place
    if first < len(path):
        src = torch.as_tensor(path[first:], dtype=torch.long, device=cache.layers[0].keys.device) + prefix_len
        lo, end = prefix_len + first, prefix_len + len(path)
        for layer in cache.layers:  # keys/values [batch, kv_heads, seq, head_dim]
            layer.keys[:, :, lo:end] = layer.keys.index_select(2, src)
            layer.values[:, :, lo:end] = layer.values.index_select(2, src)
    crop_to(cache, prefix_len + len(path))


def longest_path(spec: TreeSpec, ok: Callable[[int], bool]) -> list[int]:
    """The deepest root path whose every non-root node passes `ok`; ties go to the lower index."""
    best: list[int] = [0]
    stack: list[list[int]] = [[0]]
    while stack:
        path = stack.pop()
        if len(path) > len(best):
            best = path
        for child in reversed(spec.children(path[-1])):
            if ok(child):
                stack.append([*path, child])
    return best


def greedy_accept_path(tokens: Sequence[int], spec: TreeSpec, target_argmax: Sequence[int]) -> list[int]:
    """The longest root path where each child's token equals its parent's target argmax."""
    am = [int(t) for t in target_argmax]
    return longest_path(spec, lambda c: int(tokens[c]) == am[spec.parents[c]])


def path_weight(acc: Sequence[Sequence[float]], path: tuple[int, ...]) -> float:
    """Product of a_k^(i_k) along a rank path: the chance the whole path is right."""
    w = 1.0
    for k, i in enumerate(path):
        w *= float(acc[k][i])
    return w


def sparse_tree(acc: Sequence[Sequence[float]], total_tokens: int) -> tuple[list[tuple[int, ...]], float]:
    """Greedy sparse tree from rank accuracies acc[k][i] (head k+1, rank i+1) of `total_tokens` nodes, root included.

    Returns the rank paths (the total_tokens - 1 drafted nodes) in the order they were picked and E[L] = the sum
    of their path weights: the expected number of drafted tokens accepted per step, NOT counting the root (so
    the expected tokens committed per step, bonus included, is 1 + E[L]).
    """
    if total_tokens < 1:
        raise ValueError(f"total_tokens must be >= 1 (the root), got {total_tokens}.")
    frontier: list[tuple[float, tuple[int, ...]]] = []

    def push_children(path: tuple[int, ...]) -> None:
        k = len(path)
        if k < len(acc):
            for i in range(len(acc[k])):
                child = (*path, i)
                heapq.heappush(frontier, (-path_weight(acc, child), child))

    push_children(())
    picked: list[tuple[int, ...]] = []
    total = 0.0
    while frontier and len(picked) < total_tokens - 1:
        neg_w, path = heapq.heappop(frontier)  # largest weight; ties → lexicographically smaller path
        picked.append(path)
        total -= neg_w
        push_children(path)
    return picked, total
