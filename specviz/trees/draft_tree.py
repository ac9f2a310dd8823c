"""EAGLE's draft tree: nodes drafted by the feature head, grown statically (EAGLE-1) or dynamically (EAGLE-2).

The host-side rounds: EAGLE-1's static tree, the confidence budget's dynamic rounds (each decided on the last one's
values) and the offline replay's (specviz.tuning.eagle_replay). EAGLE-2's own growth, every round on the device,
is the method's (specviz.methods.eagle.grow).
The head itself is not imported here: growth asks only what `TreeDrafter` names of a drafter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from specviz.core.host import fetch
from specviz.trees.tree import TreeSpec, sparse_tree


class TreeDrafter(Protocol):
    """What growing a tree asks of a head's drafter (specviz.heads.eagle_drafter.Drafter is one)."""

    device: torch.device

    @property
    def length(self) -> int: ...
    def run(
        self, feats: torch.Tensor, tokens: list[int] | torch.Tensor, positions: torch.Tensor, see: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]: ...
    def token_ids(self, draft_index: torch.Tensor) -> torch.Tensor: ...


class Shape(Protocol):
    """A tree shape, read-only (a frozen config fits): draft rounds, top-k per round, nodes verified (root included)."""

    @property
    def depth(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...


CONFIDENCE_BINS = 10  # a head's confidence table: acceptance per tenth of draft probability


@dataclass(frozen=True)
class Budget:
    """A per-step node budget from calibrated confidence (EAGLE-2's dynamic tree, trimmed or cut short).

    `table[b]` is the measured probability that a drafted node is the target's token given that its parent was,
    for draft probabilities in [b/10, (b+1)/10) (specviz.tuning.confidence fits it on unseen prompts; empty: the
    draft probability itself). A node's calibrated path acceptance is the product along its path. The tree keeps
    min_tokens nodes (root included) always, a further node only while its path acceptance is at least
    node_floor, and drafts another depth only while the frontier's best is at least depth_floor.
    """

    min_tokens: int
    node_floor: float
    depth_floor: float
    table: tuple[float, ...] = ()

    def accept(self, conf: float) -> float:
        """The calibrated acceptance of a node drafted with probability conf."""
        if not self.table:
            return conf
        return self.table[min(int(conf * len(self.table)), len(self.table) - 1)]

    def path_values(self, tree: DraftTree) -> list[float]:
        """Every node's calibrated path acceptance (the root's is 1); parents precede children in a tree."""
        value = [1.0] * len(tree.tokens)
        for i in range(1, len(tree.tokens)):
            value[i] = value[tree.parents[i]] * self.accept(tree.conf[i])
        return value


@dataclass
class DraftTree:
    """Every drafted node (node 0 = the root), how it was drafted, and which nodes survive the rerank."""

    tokens: list[int]
    parents: list[int] = field(default_factory=lambda: [-1])
    depth: list[int] = field(default_factory=lambda: [0])
    score: list[float] = field(default_factory=lambda: [0.0])  # cumulative draft log-prob of the path
    conf: list[float] = field(default_factory=lambda: [1.0])  # draft probability given the parent
    expanded: list[int] = field(default_factory=lambda: [1])  # round it ran through the head, -1 never
    kept: list[bool] = field(default_factory=lambda: [True])
    feats: dict[int, torch.Tensor] = field(default_factory=dict)  # feature predicted by each expanded node
    logps: dict[int, torch.Tensor] = field(default_factory=dict)  # its draft log-probs [Vd]

    def add(self, parent: int, token: int, logp: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.score.append(self.score[parent] + logp)
        self.conf.append(math.exp(logp))
        self.expanded.append(-1)
        self.kept.append(False)
        return len(self.tokens) - 1

    def keep_best(self, total: int) -> None:
        """EAGLE-2's rerank: keep the root plus the total-1 nodes of highest cumulative score."""
        order = sorted(range(1, len(self.tokens)), key=lambda i: (-self.score[i], i))
        for i in order[: total - 1]:  # a child never outscores its parent, so the kept set is a tree
            self.kept[i] = True

    def keep_budget(self, total: int, budget: Budget) -> None:
        """The confidence budget's rerank: the root, the first min_tokens - 1 nodes by calibrated path acceptance,
        then each further node while its own is at least node_floor, up to total - 1 drafted nodes."""
        value = budget.path_values(self)
        order = sorted(range(1, len(self.tokens)), key=lambda i: (-value[i], i))
        for rank, i in enumerate(order[: total - 1]):  # a child's value never exceeds its parent's: a tree
            if rank + 1 >= budget.min_tokens and value[i] < budget.node_floor:
                break
            self.kept[i] = True

    def verified(self) -> tuple[list[int], TreeSpec]:
        """The kept nodes (drafted indices, in order) and the tree they form for verification."""
        nodes = [i for i, k in enumerate(self.kept) if k]
        where = {n: j for j, n in enumerate(nodes)}
        return nodes, TreeSpec(parents=[-1] + [where[self.parents[n]] for n in nodes[1:]])


def expand(dr: TreeDrafter, tree: DraftTree, nodes: list[int], base: int, fed: list[int], rnd: int) -> None:
    """Run `nodes` through the head at once (tree-masked), storing each one's predicted feature.

    The cache holds the prefix, then the `fed` tree nodes (its last entries); only the first `base`
    prefix pairs are visible (base < start only when replaying a stored sequence offline).
    """
    q, past = len(nodes), dr.length
    start = past - len(fed)
    rows = []  # which fed nodes each new node may see: its ancestors (built as lists, one tensor for all rows)
    for n in nodes:
        anc, a = set(), tree.parents[n]
        while a > 0:
            anc.add(a)
            a = tree.parents[a]
        rows.append([f in anc for f in fed])
    see = torch.zeros(q, past + q, dtype=torch.bool, device=dr.device)
    see[:, :base] = True  # the committed prefix, the root pair included
    if fed:
        see[:, start:past] = torch.tensor(rows, dtype=torch.bool, device=dr.device)
    see[:, past:].fill_diagonal_(True)  # each node sees itself
    feats = torch.stack([tree.feats[tree.parents[n]] for n in nodes])
    pos = torch.tensor([base - 1 + tree.depth[n] for n in nodes], device=dr.device)
    out, logp = dr.run(feats, [tree.tokens[n] for n in nodes], pos, see)
    for r, n in enumerate(nodes):
        tree.feats[n], tree.logps[n], tree.expanded[n] = out[r], logp[r], rnd
    fed.extend(nodes)


def add_children(dr: TreeDrafter, tree: DraftTree, nodes: list[int], k: int) -> list[int]:
    """Attach the draft's top-k tokens under each expanded node of `nodes` (in that order), in one host read: the
    tokens and scores a round must know to choose the next round's frontier."""
    vals, idx = torch.stack([tree.logps[n] for n in nodes]).topk(k, dim=-1)  # [m, k]
    v, t = fetch(vals, dr.token_ids(idx))
    return [tree.add(n, int(t[r * k + j]), v[r * k + j]) for r, n in enumerate(nodes) for j in range(k)]


def grow_dynamic(
    dr: TreeDrafter, tree: DraftTree, cfg: Shape, base: int | None = None, budget: Budget | None = None
) -> None:
    """EAGLE-2: each round expands the top_k newest nodes by cumulative log-prob; then rerank all. With a
    confidence budget, a round runs only while the frontier's best calibrated path acceptance reaches
    depth_floor, and the rerank keeps what the budget says (DraftTree.keep_budget)."""
    base = dr.length if base is None else base
    fed: list[int] = []
    layer = add_children(dr, tree, [0], cfg.top_k)
    for rnd in range(2, cfg.depth + 1):
        frontier = sorted(layer, key=lambda i: (-tree.score[i], i))[: cfg.top_k]
        if budget is not None:
            value = budget.path_values(tree)  # once per round, not once per frontier node
            if max(value[i] for i in frontier) < budget.depth_floor:
                break
        expand(dr, tree, sorted(frontier), base, fed, rnd)
        layer = add_children(dr, tree, sorted(frontier), cfg.top_k)
    if budget is None:
        tree.keep_best(cfg.total_tokens)
    else:
        tree.keep_budget(cfg.total_tokens, budget)


def grow_static(dr: TreeDrafter, tree: DraftTree, paths: list[tuple[int, ...]], base: int | None = None) -> None:
    """EAGLE-1: a fixed tree of rank paths; each round expands every node that has children."""
    base = dr.length if base is None else base
    fed: list[int] = []
    index: dict[tuple[int, ...], int] = {(): 0}
    for d in range(1, max((len(p) for p in paths), default=0) + 1):
        parents = sorted({index[p[:-1]] for p in paths if len(p) == d})
        if d > 1:
            expand(dr, tree, parents, base, fed, d)
        keys = {v: k for k, v in index.items()}
        ranks = {n: sorted(p[-1] for p in paths if len(p) == d and p[:-1] == keys[n]) for n in parents}
        width = max(r[-1] for r in ranks.values()) + 1
        vals, idx = torch.stack([tree.logps[n] for n in parents]).topk(width, dim=-1)
        v, t = fetch(vals, dr.token_ids(idx))  # the round's one host read
        for row, n in enumerate(parents):
            for r in ranks[n]:
                index[(*keys[n], r)] = tree.add(n, int(t[row * width + r]), v[row * width + r])
                tree.kept[-1] = True


def static_paths(calibration: list[list[float]], cfg: Shape) -> list[tuple[int, ...]]:
    """EAGLE-1's static tree: Medusa's greedy sparse tree over a head's calibrated rank accuracies."""
    acc = calibration or [[0.5 ** (i + 1) * 0.8**d for i in range(8)] for d in range(8)]
    acc = [row[: cfg.top_k] for row in acc[: cfg.depth]]  # untrained heads: a generic decaying prior
    return sparse_tree(acc, cfg.total_tokens)[0]


def matched_path(tree: DraftTree, continuation: list[int]) -> list[int]:
    """Kept nodes along the realised continuation: exactly greedy verification's path at T = 0."""
    path = [0]
    for tok in continuation:
        nxt = [
            c for c in range(len(tree.tokens)) if tree.parents[c] == path[-1] and tree.kept[c] and tree.tokens[c] == tok
        ]
        if not nxt:
            break
        path.append(nxt[0])
    return path


def feature_view(
    f_t: torch.Tensor, emb: torch.Tensor, f_pred: torch.Tensor, f_true: torch.Tensor, dims: int = 16
) -> dict:
    """What the head consumed and produced this step, as small plain numbers for the diagram."""
    f_t, emb, f_pred, f_true = (v.double().flatten() for v in (f_t, emb, f_pred, f_true))
    idx = f_true.abs().topk(min(dims, f_true.numel())).indices.sort().values
    cos = torch.nn.functional.cosine_similarity
    scaled = emb * (f_t.norm() / emb.norm())
    norms = torch.stack([f_t.norm(), emb.norm(), f_pred.norm(), f_true.norm()])
    sims = torch.stack([cos(f_pred, f_true, dim=0), cos(f_t, f_true, dim=0)])
    dim, a, b, c, d, n, s = fetch(idx, f_t[idx], scaled[idx], f_pred[idx], f_true[idx], norms, sims)  # one read

    def pick(v: list[float]) -> list[float]:
        return [round(x, 3) for x in v]

    return {
        "dims": [int(i) for i in dim],
        "f_t": pick(a),
        "embed": pick(b),
        "f_pred": pick(c),
        "f_true": pick(d),
        "norm": {"f_t": round(n[0], 3), "embed": round(n[1], 4), "f_pred": round(n[2], 3), "f_true": round(n[3], 3)},
        "cos_pred_true": round(s[0], 4),
        "cos_prev_true": round(s[1], 4),
    }


def tree_detail(tree: DraftTree, text: Callable[[int], str], kind: str) -> dict:
    """The drafted tree as plain data (every node, kept or pruned)."""
    return {
        "kind": kind,
        "tokens": list(tree.tokens),
        "texts": [text(t) for t in tree.tokens],
        "parents": list(tree.parents),
        "depth": list(tree.depth),
        "score": [round(s, 4) for s in tree.score],
        "conf": [round(c, 4) for c in tree.conf],
        "expanded": list(tree.expanded),
        "kept": list(tree.kept),
    }


def grow(
    dr: TreeDrafter,
    tree: DraftTree,
    cfg: Shape,
    kind: str,
    paths: list[tuple[int, ...]],
    base: int | None = None,
    budget: Budget | None = None,
) -> None:
    """Grow a rooted tree the EAGLE-1 way (`static`, along `paths`) or the EAGLE-2 way (`dynamic`, round by round
    on the host, under the confidence budget when one is given), where the head sees only `base` prefix pairs (a
    replay of a stored sequence). A live step grows EAGLE-2's tree on the device (specviz.methods.eagle.grow)."""
    if kind == "static":
        grow_static(dr, tree, paths, base)
    else:
        grow_dynamic(dr, tree, cfg, base, budget)
