"""EAGLE-2 with an n-gram pool: the text's own n-gram continuations grafted onto the head's draft tree.

The head drafts its dynamic tree as EAGLE-2 does; then the continuations of the context's last n-gram
(found earlier in the prompt or the output, as prompt lookup finds them) are grafted onto the same tree
when they are longer than its deepest path, taking the places of its weakest leaves, so the node budget
stays the same. One target forward checks both sources; the accepted path may run through nodes of
either. On extraction and code the pool supplies long exact runs; on open text the head does.

Copy mode: a step that accepted `copy_after` of the pool's tokens says the text is being copied, so the next
step verifies the pool's candidate alone (a chain up to `copy_length`, as prompt lookup verifies one) and the
head drafts nothing; its verified pairs wait in its queue until the next tree step. A copy step that accepts
fewer hands back to the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.details import HybridDetail
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError
from specviz.heads.eagle import EagleHead
from specviz.heads.eagle_drafter import tiny_head
from specviz.methods import eagle
from specviz.methods.base import Card, Run, Step, generator
from specviz.trees.tree_graft import HEAD, graft, lookup_tails
from specviz.trees.verifier import TreeVerifier, Verified

CARD = Card(
    name="hybrid",
    label="EAGLE-2 + n-grams",
    summary="The text's own n-gram continuations grafted onto EAGLE-2's draft tree, verified in the same pass.",
    colour="#332288",
    order=8,
    builds_on="eagle",
)


@dataclass(frozen=True)
class Config(eagle.Config):
    """EAGLE-2's tree and head, plus how many n-gram candidates may join it and how long each may be."""

    # Defaults from 8 unseen ShareGPT prompts x 64 tokens, each interleaved with plain decoding (fp32,
    # 2 cores, 2026-12-01): 6 nodes / 1 candidate / n-grams of 2+ tokens ran 1.46x median (A 2.00) against
    # EAGLE-2's 1.36x (A 1.89) at the same 6 nodes; 8 nodes 1.37x (A 2.10); 1-token matches graft on open
    # text too often and cost the head's best leaves (6 nodes, 1-grams: 1.36x against EAGLE-2's 1.49x).
    # EAGLE-2's tree and head; total_tokens counts the head's and the pool's nodes together
    candidates: int = 1  # n-gram continuations looked up per step
    length: int = 8  # longest continuation grafted (the node budget may cut it)
    max_ngram: int = 3  # match the context's last 3, then 2 tokens
    min_ngram: int = 2
    # nodes the pool may add beyond total_tokens when its candidate outgrows the tree (0 = one shared budget,
    # the rule the defaults keep). Above 0 the budget is elastic: a long copy is verified whole, as prompt
    # lookup verifies its chain, at the price of a wider forward on exactly the steps that copy.
    pool_extra: int = 0
    # Copy mode: once a step accepts at least copy_after of the pool's tokens, the text is being copied, and
    # the next step verifies the pool's candidate alone (up to copy_length tokens, beyond the node budget):
    # the head drafts nothing, as prompt lookup would not. A copy step that accepts fewer hands back to the
    # tree. 0 = never. Chosen on 14 unseen ShareGPT prompts x 96 tokens, 2 interleaved runs each (fp32,
    # 2 cores, 2026-12-01): mean speedup on the 8 long prompts (pasted code or text) 2.13x for copy_after 3,
    # 2.08x for 4, 2.00x with copy mode off (prompt lookup 1.92x, EAGLE-2 1.55x); on the 6 short ones
    # 1.94x / 1.87x / 1.86x.
    copy_after: int = 3
    copy_length: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()  # the tree, head dtype and budget, as every EAGLE-family Config checks them
        if not (0 <= self.candidates <= 8 and 1 <= self.length <= 16):
            raise ConfigError(f"need 0-8 candidates of 1-16 tokens, got {self.candidates}, {self.length}.")
        if not 0 <= self.pool_extra <= 32:
            raise ConfigError(f"pool_extra must be between 0 and 32 nodes, got {self.pool_extra}.")
        if not (0 <= self.copy_after <= 16 and 1 <= self.copy_length <= 16):
            raise ConfigError(f"need copy_after 0-16 and copy_length 1-16, got {self.copy_after}, {self.copy_length}.")
        if not 1 <= self.min_ngram <= self.max_ngram <= 8:
            raise ConfigError(f"need 1 ≤ min_ngram ≤ max_ngram ≤ 8, got {self.min_ngram}, {self.max_ngram}.")


class PoolProposer:
    """EAGLE's proposer with the n-gram pool: the head's tree with the text's continuations grafted on, or on a copy
    step the pool's candidate alone; it remembers who proposed each node and how many of the pool's tokens the
    target kept, which decides the next copy step."""

    def __init__(self, head: eagle.EagleProposer, cfg: Config) -> None:
        self.head, self.cfg, self.layers = head, cfg, head.layers
        self.sources: list[str] = []
        self.tails: list[list[int]] = []
        self.copied = False
        self.pool_run = 0  # the pool's tokens on the last step's accepted path
        self.draft: eagle.EagleDraft | None = None

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None:
        self.head.start(run, prompt_feats)

    def copy_tail(self, run: Run, root: int) -> list[int]:
        """The pool's candidate for a copy step: [] unless the last step accepted copy_after of its tokens and
        a candidate at least that long continues the text."""
        c = self.cfg
        if not c.copy_after or self.pool_run < c.copy_after:
            return []
        length = min(c.copy_length, run.remaining - 1)
        tails = lookup_tails([*run.context, root], c.max_ngram, c.min_ngram, length, 1)
        return tails[0] if tails and len(tails[0]) >= min(c.copy_after, length) else []

    def propose(self, run: Run, root: int) -> eagle.EagleDraft:
        """The head's tree with the pool's candidates grafted on under the node budget, or on a copy step the
        pool's candidate alone (the head sits out)."""
        c, f_t, copy = self.cfg, self.head.root_feature(run), self.copy_tail(run, root)
        if copy:
            tree, self.tails, budget = self.head.skip(f_t, root), [copy], 1 + len(copy)
        else:
            tree = self.head.draft(f_t, root)
            self.tails = lookup_tails([*run.context, root], c.max_ngram, c.min_ngram, c.length, c.candidates)
            budget = c.total_tokens + (c.pool_extra if self.tails else 0)
        self.sources = graft(tree, self.tails, budget, [HEAD] * len(tree.tokens))
        self.copied, self.draft = bool(copy), eagle.EagleDraft.of(tree, f_t)
        return self.draft

    def commit(self, v: Verified, path: list[int]) -> None:
        """The head keeps the accepted path's features; the pool counts its tokens on it."""
        self.head.commit(v, path)
        nodes = self.draft.nodes if self.draft is not None else []
        self.pool_run = sum(self.sources[nodes[i]] != HEAD for i in path[1:])

    def record(self, res: eagle.TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """EAGLE's record of the step, with who proposed each drafted node, the candidates and whether it copied."""
        tails = [list(t) for t in self.tails]
        return {**self.head.record(res, text), "sources": list(self.sources), "candidates": tails, "copy": self.copied}


class Hybrid(eagle.Eagle):
    """The pool's proposer and the tree verifier, in the tree methods' one step (methods.speculator.TreeSpeculator:
    propose → verify → accept → commit); the step's record says who proposed each node."""

    DETAIL = HybridDetail
    proposer: PoolProposer  # type: ignore[assignment]


def begin(run: Run, cfg: Config, head: EagleHead | None = None) -> Step:
    """EAGLE's head (given, else cfg.head's) and the n-gram pool, drafting from the run's state."""
    return Hybrid(PoolProposer(eagle.proposer(run.lm, cfg, head), cfg), TreeVerifier()).start(run)


generate = generator(
    CARD.name, Config, begin, "Decode with the EAGLE head and the n-gram pool until EOS or max_new_tokens."
)


def tiny_resources(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> dict:
    """An untrained head (heads.eagle_drafter.tiny_head) and a tree with room for the pool, for any model."""
    config = Config(depth=3, top_k=3, total_tokens=10, head_dtype="model")
    return {"config": config, "head": tiny_head(lm, seed, accepting)}


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a head whose every draft is right on a model whose next token ignores its input."""
    return tiny_resources(lm, accepting=True)
