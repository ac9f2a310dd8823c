"""The tree verifier, one for every tree method: one target forward over a drafted token tree (verify), the one
acceptance walk down it (accept, specviz.trees.walk) and the accepted path kept in the target's cache (commit).

A method is its proposer plus a choice of verifier (specviz.methods.speculator). The verifiers differ only in how
much the forward hands back: EAGLE's every LM-head row (and, for a head that fuses them, the inputs of some of the
target's layers); a heads tree's (Medusa's, Hydra's) only the rows of nodes with children, with their
probabilities, since its leaves are point-mass guesses whose row is needed only when the walk ends on one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling, target_probs
from specviz.trees.tree import TreeSpec, commit_path, verify_tree, verify_tree_layers
from specviz.trees.walk import EXACT, Rule, Walk, walk

ALL_ROWS = 8  # trees of at most this many nodes project every node's LM-head row in one call (see heads_forward)


class RunView(Protocol):
    """What a proposer or a verifier reads of the method's Run (specviz.methods.base.Run satisfies it)."""

    lm: LoadedModel
    cache: Any
    sampling: Sampling
    gen: torch.Generator

    prompt_ids: list[int]
    prefill_s: float

    @property
    def pending_hidden(self) -> torch.Tensor: ...
    @property
    def seq_len(self) -> int: ...
    def phase(self, name: str) -> AbstractContextManager[None]: ...
    def now(self) -> float: ...


@dataclass
class Verified:
    """One target forward over a tree: what was sent, where it went in the cache, and what the target said."""

    tokens: list[int]  # the tree's tokens, root first
    spec: TreeSpec
    prefix: int  # tokens in the cache before the tree
    logits: torch.Tensor  # [n, V] (a heads tree's leaf rows stay 0 until needed)
    hidden: torch.Tensor  # [n, H]
    feats: torch.Tensor  # what the proposer reads of each node: the hidden state, or the fused layers' inputs
    probs: torch.Tensor | None = None  # [n, V] the target's p at inner nodes, when the forward computed them


class TreeVerifier:
    """EAGLE's verifier: every node's LM-head row; with `layers`, each node's inputs of those target layers too."""

    def __init__(self, layers: tuple[int, ...] = (), rule: Rule = EXACT) -> None:
        self.layers, self.rule = layers, rule

    def verify(self, run: RunView, tokens: list[int], spec: TreeSpec) -> Verified:
        """One target forward over the tree (tree attention, positions by depth)."""
        prefix = run.seq_len
        if self.layers:
            logits, hidden, feats = verify_tree_layers(run.lm, run.cache, tokens, spec, self.layers)
            return Verified(tokens, spec, prefix, logits, hidden, feats)
        logits, hidden = verify_tree(run.lm, run.cache, tokens, spec)
        return Verified(tokens, spec, prefix, logits, hidden, hidden)

    def accept(self, run: RunView, v: Verified) -> Walk:
        """The one acceptance walk: greedy match at T = 0, the rule (tree speculative sampling) at T > 0."""
        return walk(run.sampling, run.gen, v.tokens, v.spec, v.logits, v.probs, run.lm.token_text, self.rule)

    def commit(self, run: RunView, v: Verified, w: Walk) -> None:
        """Keep the accepted path's keys and values after the prefix; drop the rest of the tree."""
        commit_path(run.cache, v.prefix, w.path)


class HeadsVerifier(TreeVerifier):
    """A heads tree's verifier (Medusa's, Hydra's): LM-head rows of the inner nodes only, and the method's rule."""

    def verify(self, run: RunView, tokens: list[int], spec: TreeSpec) -> Verified:
        prefix = run.seq_len
        logits, probs, hidden = heads_forward(run.lm, run.cache, tokens, spec, run.sampling)
        return Verified(tokens, spec, prefix, logits, hidden, hidden, probs)

    def commit(self, run: RunView, v: Verified, w: Walk) -> None:
        """The next root's logits first, when the path ended on a leaf whose row the forward skipped; then the path."""
        ensure_last_logits(run.lm, v.logits, v.hidden, w.path[-1], v.spec)
        super().commit(run, v, w)


def heads_forward(
    lm: LoadedModel, cache: Any, tokens: list[int], spec: TreeSpec, sampling: Sampling
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tree forward; LM-head rows of every node in a small tree, else only of nodes with children (leaf rows
    stay 0 until needed, ensure_last_logits).

    Returns logits [n, V], target probabilities [n, V] (rows of inner nodes at least) and hidden [n, H].
    The LM head is 49,152 × 576 and its cost is the weight's read: on 2 cores (oneDNN fp32, under load) 1 row took
    24.6 ms, 4 rows 27.6, 8 rows 34.2. So up to ALL_ROWS nodes every row is projected in the one call, and a walk
    that ends on a leaf never pays a second call for the next root's logits; a bigger tree projects its inner
    nodes only.
    """
    _, hidden = verify_tree(lm, cache, tokens, spec, logits_for=slice(0, 0))
    logits, probs, _ = project(lm, hidden, spec, sampling)
    return logits, probs, hidden


def project(
    lm: LoadedModel, hidden: torch.Tensor, spec: TreeSpec, sampling: Sampling, extra: list[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The LM-head rows a heads tree's walk reads (projected_rows), with the rows of `extra` slots of the same
    forward in the one product (Medusa + Lookahead's window): logits [n, V] and the target's p [n, V], zero where not
    projected, and the extra rows [len(extra), V] (None without: a heads tree's step slices nothing it need not)."""
    inner = projected_rows(spec)
    rows = lm.lm_head(hidden[inner + list(extra or [])]).float()  # [len(inner) + len(extra), V]
    tree_rows = rows[: len(inner)] if extra else rows
    logits = rows.new_zeros(len(spec), rows.shape[-1])
    probs = rows.new_zeros(len(spec), rows.shape[-1])  # the distribution each node's children face
    logits[inner] = tree_rows
    probs[inner] = target_probs(tree_rows, sampling)
    return logits, probs, rows[len(inner) :] if extra else None


def projected_rows(spec: TreeSpec) -> list[int]:
    """The nodes whose LM-head rows `heads_forward` projects: every node of a small tree, else those with children
    (and a few leaves, so that at least 4 rows go through the LM head)."""
    inner = [j for j in range(len(spec)) if spec.children(j)]
    if len(spec) <= ALL_ROWS:
        return list(range(len(spec)))
    if 1 < len(inner) < 4:  # fp32 products of 2-3 rows are slower here than of 4: add leaves
        return sorted(inner + spec.leaves()[: 4 - len(inner)])
    return inner


def ensure_last_logits(lm: LoadedModel, logits: torch.Tensor, hidden: torch.Tensor, last: int, spec: TreeSpec) -> None:
    """A walk that ended on a leaf whose row `heads_forward` skipped (projected_rows says which, without reading the
    logits back): project that row now, for the next root."""
    if last not in projected_rows(spec):
        logits[last] = lm.lm_head(hidden[last : last + 1]).float()[0]
